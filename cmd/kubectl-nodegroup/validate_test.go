package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	poolYAML = `apiVersion: nodegroup.io/v1alpha1
kind: NodeGroup
metadata: {name: workers, namespace: tenant-a}
spec:
  clusterName: tenant-a
  maxReplicas: 3
  resources: {cpu: "2", memory: 4Gi}
`
	kairosPoolYAML = `apiVersion: nodegroup.io/v1alpha1
kind: NodeGroup
metadata: {name: gpu, namespace: tenant-a}
spec:
  clusterName: tenant-a
  nodeGroupClassName: kairos-own
  maxReplicas: 3
  resources: {cpu: "2", memory: 4Gi}
  kernelModules: [nvidia]
`
	kairosClassYAML = `apiVersion: nodegroup.io/v1alpha1
kind: NodeGroupClass
metadata: {name: kairos-own}
spec:
  os: Kairos
  image: {reference: "registry.example.com/k@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", kubernetesVersion: v1.35.4}
`
	goldPoolYAML = `apiVersion: nodegroup.io/v1alpha1
kind: NodeGroup
metadata: {name: workers, namespace: tenant-a}
spec:
  clusterName: tenant-a
  locationName: gold
  maxReplicas: 3
  resources: {cpu: "2", memory: 4Gi}
`
	goldLocationYAML = `apiVersion: nodegroup.io/v1alpha1
kind: Location
metadata: {name: gold}
spec:
  provider: {type: KubeVirt, kubevirt: {}}
  allowedNamespaces: {matchLabels: {tier: gold}}
`
	// What the API server answers to taggedClassYAML, and to goldLocationYAML with type
	// Proxmox (a type naming a block that is not set).
	taggedClassRefused = `tagged.yaml: NodeGroupClass.nodegroup.io "kairos-own" is invalid: spec.image.reference: Invalid value: "registry.example.com/k:v1.35.4": ` +
		`spec.image.reference must be pinned by digest, as registry/repository@sha256:<64 lowercase hex>`
	mismatchLocationRefused = `mismatch.yaml: Location.nodegroup.io "gold" is invalid: spec.provider: Invalid value: ` +
		`spec.provider.type must name the provider block that is set (KubeVirt: kubevirt, Proxmox: proxmox, HCloud: hcloud, Static: static)`
	// twoContexts is a kubeconfig whose current context is in namespace elsewhere and
	// whose context two is in tenant-b; neither server is ever asked.
	twoContexts = `apiVersion: v1
kind: Config
clusters: [{name: one, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: one, context: {cluster: one, user: u, namespace: elsewhere}}
- {name: two, context: {cluster: one, user: u, namespace: tenant-b}}
current-context: one
`
	brokenClassYAML = `apiVersion: nodegroup.io/v1alpha1
kind: NodeGroupClass
metadata: {name: kairos-own}
spec:
  os: Kairos
  poolRules: [{rule: "object.spec.maxReplicas <=", message: m}]
`
)

// taggedClassYAML is kairosClassYAML with its image named by tag, which the class's CRD
// rule refuses.
func taggedClassYAML() string {
	return regexp.MustCompile(`@sha256:[0-9a-f]+`).ReplaceAllString(kairosClassYAML, ":v1.35.4")
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name     string
		args     func(t *testing.T) []string
		wantCode int
		wantOut  string
	}{
		{"admitted pool on built-ins", func(t *testing.T) []string { return []string{"validate", "-f", write(t, "p.yaml", poolYAML)} }, 0, "is admitted"},
		{"one document between separators", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", "---\n"+poolYAML+"---\n")}
		}, 0, "is admitted"},
		{"talos-only field on a kairos class", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", kairosPoolYAML), "--class", write(t, "c.yaml", kairosClassYAML)}
		}, 1, "spec.kernelModules"},
		{"location not admitting the namespace", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", goldPoolYAML), "--location", write(t, "l.yaml", goldLocationYAML), "--namespace-labels", "tier=silver"}
		}, 1, "spec.locationName"},
		{"location admitting the namespace", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", goldPoolYAML), "--location", write(t, "l.yaml", goldLocationYAML), "--namespace-labels", "tier=gold"}
		}, 0, "is admitted"},
		{"ahead of the control plane", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", strings.Replace(poolYAML, "maxReplicas: 3", "maxReplicas: 3\n  kubernetesVersion: v1.36", 1)), "--control-plane-version", "v1.35.4"}
		}, 1, "spec.kubernetesVersion"},
		{"os switch of a running pool", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", strings.Replace(kairosPoolYAML, "  kernelModules: [nvidia]\n", "", 1)),
				"--class", write(t, "c.yaml", kairosClassYAML), "--old", write(t, "o.yaml", strings.Replace(poolYAML, "name: workers", "name: gpu", 1)), "--running"}
		}, 1, "spec.nodeGroupClassName"},
		{"refused by the CRD's rules, as the API server words it", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", strings.Replace(poolYAML, "maxReplicas: 3", "minReplicas: 5\n  maxReplicas: 3\n  kubernetesVersion: \"1.35\"\n"+
				"  labels: {kubernetes.io/role: x, a: \"x\\ny\"}\n  taints: [{key: \"a;b\", effect: NoSchedule}]", 1))}
		}, 1, `NodeGroup tenant-a/workers is refused:
  - spec: Invalid value: spec.minReplicas must not exceed spec.maxReplicas
  - spec.kubernetesVersion: Invalid value: "1.35": spec.kubernetesVersion must look like v1.35 or v1.35.4
  - spec.labels: Invalid value: spec.labels keys in the kubernetes.io, k8s.io and nodegroup.io domains are reserved: use spec.roles for node roles, or another domain
  - spec.labels[a]: Invalid value: "x\ny": spec.labels values must be valid label values: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit
  - spec.taints[0].key: Invalid value: "a;b": spec.taints[].key must be a valid label key
`},
		{"judged by the webhook's code from the objects given", func(t *testing.T) []string {
			return []string{"validate", "-f", "../../examples/pools.yaml", "--name", "kairos", "--objects", "../../examples/tenant.yaml", "--objects", "../../examples/platform.yaml"}
		}, 0, "NodeGroup tenant-demo/kairos is admitted"},
		{"a class missing from the objects given", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", kairosPoolYAML), "--objects", "../../examples/platform.yaml"}
		}, 1, `NodeGroupClass "kairos-own" does not exist: set spec.nodeGroupClassName to a published class (kubectl get nodegroupclasses)`},
		{"missing class file", func(t *testing.T) []string { return []string{"validate", "-f", write(t, "p.yaml", kairosPoolYAML)} }, 2, `pass it with --class`},
		{"unknown field", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", poolYAML+"  colour: blue\n")}
		}, 2, `strict decoding error: unknown field "spec.colour"`},
		{"wrong kind", func(t *testing.T) []string { return []string{"validate", "-f", write(t, "p.yaml", goldLocationYAML)} }, 2, `kind "Location", want NodeGroup`},
		{"several documents", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", poolYAML+"---\n"+poolYAML)}
		}, 2, "several YAML documents"},
		{"class rule that does not compile", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", kairosPoolYAML), "--class", write(t, "c.yaml", brokenClassYAML)}
		}, 2, "class \"kairos-own\""},
		{"no file", func(t *testing.T) []string { return []string{"validate"} }, 2, "-f pool.yaml is required"},
		{"pool without a namespace in the namespace of --context", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", strings.Replace(poolYAML, ", namespace: tenant-a", "", 1)),
				"--kubeconfig", write(t, "kubeconfig", twoContexts), "--context", "two"}
		}, 0, "NodeGroup tenant-b/workers is admitted"},
		{"pool without a namespace in the namespace of the current context", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", strings.Replace(poolYAML, ", namespace: tenant-a", "", 1)),
				"--kubeconfig", write(t, "kubeconfig", twoContexts)}
		}, 0, "NodeGroup elsewhere/workers is admitted"},
		{"-n other than the pool's namespace", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", poolYAML), "-n", "tenant-b"}
		}, 2, `p.yaml: the namespace of NodeGroup "workers" is "tenant-a", not "tenant-b" (-n)`},
		{"class the API server would refuse", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", kairosPoolYAML), "--class", write(t, "tagged.yaml", taggedClassYAML())}
		}, 2, taggedClassRefused},
		{"location the API server would refuse", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", goldPoolYAML), "--location", write(t, "mismatch.yaml", strings.Replace(goldLocationYAML, "type: KubeVirt", "type: Proxmox", 1)), "--namespace-labels", "tier=gold"}
		}, 2, mismatchLocationRefused},
		{"old class the API server would refuse", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", poolYAML), "--old", write(t, "o.yaml", strings.Replace(kairosPoolYAML, "name: gpu", "name: workers", 1)),
				"--old-class", write(t, "tagged.yaml", taggedClassYAML())}
		}, 2, taggedClassRefused},
		{"class among the objects the API server would refuse", func(t *testing.T) []string {
			return []string{"validate", "-f", write(t, "p.yaml", kairosPoolYAML), "--objects", write(t, "tagged.yaml", taggedClassYAML())}
		}, 2, taggedClassRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args(t), &out, &errOut)
			all := out.String() + errOut.String()
			if code != tc.wantCode || !strings.Contains(all, tc.wantOut) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, all, tc.wantCode, tc.wantOut)
			}
		})
	}
}
