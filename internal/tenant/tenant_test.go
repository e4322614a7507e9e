package tenant

import (
	"strings"
	"testing"
)

// A kubeconfig with its credentials inline is read; one that would make the operator
// run a command, read its own files, go through a proxy or impersonate is refused.
func TestRestConfigTakesOnlyInlineCredentials(t *testing.T) {
	const base = `apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://10.0.0.1:6443", %CLUSTER%}}]
users: [{name: u, user: {%USER%}}]
`
	kc := func(cluster, user string) []byte {
		return []byte(strings.NewReplacer("%CLUSTER%", cluster, "%USER%", user).Replace(base))
	}
	cfg, err := restConfig(kc(`certificate-authority-data: Y2E=`, `token: abc`))
	if err != nil {
		t.Fatalf("an inline kubeconfig: %v", err)
	}
	if cfg.Host != "https://10.0.0.1:6443" || cfg.BearerToken != "abc" || string(cfg.CAData) != "ca" {
		t.Errorf("config %+v", cfg)
	}
	for name, c := range map[string][2]string{
		"exec":             {`certificate-authority-data: Y2E=`, `exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}`},
		"token file":       {`certificate-authority-data: Y2E=`, `tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token`},
		"CA file":          {`certificate-authority: /etc/ssl/ca.crt`, `token: abc`},
		"client cert file": {`certificate-authority-data: Y2E=`, `client-certificate: /tmp/c.crt, client-key: /tmp/c.key`},
		"proxy":            {`certificate-authority-data: Y2E=, proxy-url: "http://evil:3128"`, `token: abc`},
		"impersonation":    {`certificate-authority-data: Y2E=`, `token: abc, as: system:admin`},
		"auth provider":    {`certificate-authority-data: Y2E=`, `auth-provider: {name: oidc}`},
	} {
		if _, err := restConfig(kc(c[0], c[1])); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
