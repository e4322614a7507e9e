package release

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The krew index's plugin manifest (krew.googlecontainertools.github.com/v1alpha2,
// kind Plugin), as `kubectl krew install --manifest` and the krew-index repository
// read it. krew's own types (sigs.k8s.io/krew/pkg/index) are not imported: their module
// requires k8s.io/client-go v11.0.0+incompatible, which would replace this module's
// client-go.

// KrewPlugin is a krew plugin manifest.
type KrewPlugin struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        KrewMetadata   `json:"metadata"`
	Spec            KrewPluginSpec `json:"spec"`
}

// KrewMetadata names the plugin (metav1.ObjectMeta would write a null creationTimestamp).
type KrewMetadata struct {
	Name string `json:"name"`
}

// KrewPluginSpec is what krew installs, per platform.
type KrewPluginSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage,omitempty"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description,omitempty"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is the archive of the platforms its selector matches.
type KrewPlatform struct {
	Selector *metav1.LabelSelector `json:"selector"`
	URI      string                `json:"uri"`
	SHA256   string                `json:"sha256"`
	Files    []KrewFile            `json:"files,omitempty"`
	Bin      string                `json:"bin"`
}

// KrewFile copies files of the unpacked archive into the plugin's folder.
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// KrewManifest renders the manifest of the plugin's archives, each downloaded from
// baseURL/<archive name>. krew names the plugin `nodegroup` and so the file
// plugins/nodegroup.yaml.
func KrewManifest(version, baseURL string, archives []Archive) ([]byte, error) {
	p := KrewPlugin{
		TypeMeta: metav1.TypeMeta{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"},
		Metadata: KrewMetadata{Name: strings.TrimPrefix(PluginName, "kubectl-")},
		Spec: KrewPluginSpec{
			Version:          version,
			Homepage:         "https://github.com/nodegroup-io/nodegroup-operator",
			ShortDescription: "Check, render and inspect NodeGroup worker pools",
			Description: "Checks a NodeGroup against the published classes and locations, renders the\n" +
				"Cluster API objects the operator would make of it, explains its fields and\n" +
				"shows pools, classes and locations, offline or against a cluster.\n",
		},
	}
	for _, a := range archives {
		name := a.File[strings.LastIndex(a.File, "/")+1:]
		p.Spec.Platforms = append(p.Spec.Platforms, KrewPlatform{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": a.OS, "arch": a.Arch}},
			URI:      strings.TrimSuffix(baseURL, "/") + "/" + name,
			SHA256:   a.SHA256,
			Files:    []KrewFile{{From: PluginName, To: "."}},
			Bin:      PluginName,
		})
	}
	if len(p.Spec.Platforms) == 0 {
		return nil, fmt.Errorf("no plugin archives")
	}
	return yaml.Marshal(p)
}
