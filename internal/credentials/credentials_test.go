package credentials

import (
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func dockerConfig(auths string) *corev1.Secret {
	return &corev1.Secret{Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{` + auths + `}}`)}}
}

func TestRegistryCredentialsFindsTheImagesRegistry(t *testing.T) {
	hub := dockerConfig(`"https://index.docker.io/v1/":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("hub:pw")) + `"}`)
	cases := []struct {
		name   string
		secret *corev1.Secret
		image  string
		user   string
	}{
		{"Docker Hub, no host, tag", hub, "alpine:3", "hub"},
		{"Docker Hub, no host, namespace", hub, "library/alpine", "hub"},
		{"Docker Hub by its name", hub, "docker.io/library/alpine:3", "hub"},
		{"Docker Hub stored as docker.io", dockerConfig(`"docker.io":{"username":"podman","password":"pw"}`), "alpine", "podman"},
		{"registry with a port", dockerConfig(`"registry.example:5000":{"username":"robot","password":"pw"}`),
			"registry.example:5000/team/disk@sha256:" + strings.Repeat("a", 64), "robot"},
		{"registry stored as a URL", dockerConfig(`"https://ghcr.io":{"username":"gh","password":"pw"}`), "ghcr.io/org/img:v1", "gh"},
		{"CDI's own keys", &corev1.Secret{Data: map[string][]byte{keyAccessKeyID: []byte("cdi"), keySecretKey: []byte("pw")}}, "anything", "cdi"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := registryCredentials(c.secret, c.image)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(data[keyAccessKeyID]); got != c.user {
				t.Errorf("user %q, want %q", got, c.user)
			}
		})
	}
}

func TestRegistryCredentialsRefusals(t *testing.T) {
	other := dockerConfig(`"registry.example:5000":{"username":"robot","password":"pw"}`)
	cases := []struct {
		name   string
		secret *corev1.Secret
		image  string
		want   string
	}{
		// Before, the host was the text up to the first '/': "alpine:3" looked for a
		// registry "alpine:3", and "registry.example:5000" matched a Docker Hub image.
		{"Docker Hub image, other registry's credential", other, "alpine:3", "has no credential for registry index.docker.io"},
		{"port differs", other, "registry.example/team/disk:v1", "has no credential for registry registry.example"},
		{"not a reference", other, "registry.example:5000/Team/../disk", "is not an image reference"},
		{"empty reference", other, "", "is not an image reference"},
		{"auth not base64", dockerConfig(`"ghcr.io":{"auth":"%%%"}`), "ghcr.io/org/img", "auth for ghcr.io is not base64"},
		{"not a docker config", &corev1.Secret{Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("[")}}, "alpine", "is not a docker config"},
		{"neither form", &corev1.Secret{}, "alpine", "holds neither"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := registryCredentials(c.secret, c.image)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
