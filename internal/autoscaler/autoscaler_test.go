package autoscaler_test

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/golden"
)

var kubevirtTemplates = schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "kubevirtmachinetemplates"}

func input(t *testing.T, mutate func(*autoscaler.Input)) autoscaler.Input {
	t.Helper()
	s := autoscaler.DefaultSettings()
	image, ok := s.ImageFor(catalog.Default(), "v1.35.4")
	if !ok {
		t.Fatal("the catalog knows no autoscaler for v1.35")
	}
	in := autoscaler.Input{
		Cluster:            types.NamespacedName{Namespace: "tenant-a", Name: "tenant-a"},
		Image:              image,
		TemplateResources:  []schema.GroupResource{kubevirtTemplates},
		MachineDeployments: []string{"tenant-a-workers", "tenant-a-gpu"},
		Settings:           s,
		Kubeconfig:         []byte("apiVersion: v1\nkind: Config\n"),
	}
	if mutate != nil {
		mutate(&in)
	}
	return in
}

func marshal(t *testing.T, in autoscaler.Input) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, obj := range autoscaler.Objects(in) {
		y, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes()
}

func TestObjectsGolden(t *testing.T) {
	cases := map[string]autoscaler.Input{
		"defaults": input(t, nil),
		"platform-settings": input(t, func(in *autoscaler.Input) {
			in.Settings.Image.Repository = "registry.example.com/mirror/cluster-autoscaler"
			in.Settings.Image.Tags = map[string]string{"v1.35": "v1.35.1"}
			in.Settings.Image.Digests = map[string]string{"v1.35": "sha256:" + strings.Repeat("ab", 32)}
			in.Settings.Image.PullSecrets = []string{"mirror-pull"}
			in.Image, _ = in.Settings.ImageFor(catalog.Default(), "v1.35.4")
			in.Settings.Expander = "least-nodes"
			in.Settings.EnforceNodeGroupMinSize = true
			in.Settings.LogLevel = 2
			in.Settings.PriorityClassName = "tenant-system"
			in.Settings.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
		}),
		"two-template-kinds": input(t, func(in *autoscaler.Input) {
			in.TemplateResources = append(in.TemplateResources,
				schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "proxmoxmachinetemplates"}, kubevirtTemplates)
		}),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			first := marshal(t, in)
			if !bytes.Equal(first, marshal(t, in)) {
				t.Fatal("two renders of the same input differ")
			}
			golden.Check(t, name, first)
		})
	}
}

// TestImageFollowsTheMinor: the catalog pairs every minor with an autoscaler of the
// same minor (or, for a minor upstream has not released an autoscaler for, an older
// one), and a platform's tag and digest for a minor win.
func TestImageFollowsTheMinor(t *testing.T) {
	s := autoscaler.DefaultSettings()
	c := catalog.Default()
	for _, minor := range c.Minors() {
		ref, ok := s.ImageFor(c, minor+".1")
		if !ok {
			t.Fatalf("no image for %s", minor)
		}
		if !strings.HasPrefix(ref, "registry.k8s.io/autoscaling/cluster-autoscaler:v1.") {
			t.Errorf("%s: %s", minor, ref)
		}
	}
	if ref, _ := s.ImageFor(c, "v1.35.4"); ref != "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.2" {
		t.Errorf("v1.35.4 runs %s, want the catalog's v1.35.2", ref)
	}
	if _, ok := s.ImageFor(c, "v1.20.0"); ok {
		t.Error("an image for a minor the catalog does not know")
	}
	s.Image.Tags = map[string]string{"v1.20": "v1.20.9"}
	if ref, ok := s.ImageFor(c, "v1.20.3"); !ok || ref != "registry.k8s.io/autoscaling/cluster-autoscaler:v1.20.9" {
		t.Errorf("the platform's tag for v1.20: %s %v", ref, ok)
	}
}

func TestParseSettings(t *testing.T) {
	s, err := autoscaler.ParseSettings("")
	if err != nil || s.Expander != "least-waste" || s.ScanInterval.Duration.String() != "10s" || !s.Enabled {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	s, err = autoscaler.ParseSettings(`{"enabled":false,"expander":"random","scanInterval":"30s","image":{"repository":"r.example.com/ca","tags":{"v1.35":"v1.35.9"},"digests":{},"pullPolicy":"Always","pullSecrets":["p"]}}`)
	if err != nil || s.Enabled || s.Expander != "random" || s.ScanInterval.Duration.String() != "30s" || s.Image.Tags["v1.35"] != "v1.35.9" {
		t.Fatalf("parsed: %+v, %v", s, err)
	}
	for name, tc := range map[string]struct{ json, want string }{
		"unknown field":    {`{"expandr":"random"}`, `unknown field "expandr"`},
		"unknown expander": {`{"expander":"priority"}`, `expander "priority" must be one of`},
		"tag for a patch":  {`{"image":{"repository":"r.example.com/ca","tags":{"v1.35.1":"x"}}}`, `image.tags: "v1.35.1"`},
		"bad digest":       {`{"image":{"repository":"r.example.com/ca","digests":{"v1.35":"sha256:abc"}}}`, `image.digests: "v1.35"`},
		"bad repository":   {`{"image":{"repository":"Registry/CA"}}`, `image.repository "Registry/CA"`},
		"scan too fast":    {`{"scanInterval":"10ms"}`, `scanInterval 10ms must be at least 1s`},
		"negative delay":   {`{"scaleDownDelayAfterAdd":"-1m"}`, `scaleDownDelayAfterAdd -1m0s must not be negative`},
		"bad pull secret":  {`{"image":{"repository":"r.example.com/ca","pullSecrets":["Not_A_Name"]}}`, `image.pullSecrets: "Not_A_Name"`},
		"bad pull policy":  {`{"image":{"repository":"r.example.com/ca","pullPolicy":"Sometimes"}}`, `image.pullPolicy "Sometimes"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := autoscaler.ParseSettings(tc.json)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A Role for no autoscaled MachineDeployment grants no scale at all: a scale rule
// without resourceNames would grant every MachineDeployment's.
func TestRulesWithoutMachineDeploymentsGrantNoScale(t *testing.T) {
	for _, r := range autoscaler.Rules([]schema.GroupResource{kubevirtTemplates}, nil) {
		for _, res := range r.Resources {
			if res == "machinedeployments/scale" {
				t.Fatalf("a scale rule for no MachineDeployment: %+v", r)
			}
		}
	}
}
