package chart

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// The release every test renders: the name and namespace a platform would install with.
const (
	releaseName      = "nodegroup-operator"
	releaseNamespace = "nodegroup-system"
)

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "nodegroup-operator") }

func crdChartDir() string {
	return filepath.Join(testenv.RepoRoot(), "charts", "nodegroup-operator-crds")
}

// customValues turns on what the defaults leave off and off what they leave on, so the
// two renders cover every branch of the templates between them.
const customValues = `
global:
  imagePullSecrets:
    - name: platform-registry
replicaCount: 3
extraArgs:
  - --zap-stacktrace-level=panic
extraEnv:
  - name: HTTPS_PROXY
    value: http://proxy.platform.example.com:3128
  - name: GOMAXPROCS
    valueFrom:
      resourceFieldRef:
        resource: limits.cpu
networkPolicy:
  enabled: true
  metricsFrom:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: monitoring
  extraEgress:
    - to:
        - ipBlock:
            cidr: 10.20.0.0/16
      ports:
        - port: 3128
          protocol: TCP
commonLabels:
  platform.example.com/team: nodes
  platform.example.com/tier: control
image:
  tag: v0.1.1
podLabels:
  platform.example.com/scrape: "true"
podAnnotations:
  platform.example.com/owner: nodes
serviceAccount:
  annotations:
    platform.example.com/role: operator
imagePullSecrets:
  - name: registry-credentials
priorityClassName: system-cluster-critical
nodeSelector:
  node-role.kubernetes.io/control-plane: ""
tolerations:
  - key: node-role.kubernetes.io/control-plane
    operator: Exists
    effect: NoSchedule
logLevel: debug
concurrency: 8
syncPeriod: 30m
pprof:
  enabled: true
  port: 6060
managementDNS:
  service: coredns
  domain: mgmt.example.com
metrics:
  serviceMonitor:
    enabled: true
    interval: 30s
    labels:
      release: prometheus
  dashboard:
    enabled: true
    annotations:
      grafana_folder: Platform
  prometheusRule:
    enabled: true
    labels:
      release: prometheus
webhook:
  certManager:
    enabled: true
builtins:
  classes:
    talos:
      enabled: false
    kairos:
      enabled: false
  location:
    inCluster:
      enabled: false
tenantCatalog:
  subjects:
    - kind: Group
      name: platform:tenants
      apiGroup: rbac.authorization.k8s.io
    - kind: ServiceAccount
      name: pool-bot
      namespace: ci
kairosBootstrap:
  serviceAccount:
    name: capi-kairos-bootstrap-manager
    namespace: capi-kairos-bootstrap-system
`

// externalIssuerValues: cert-manager with the platform's ClusterIssuer, one replica (no
// PodDisruptionBudget), an image by digest, no leader election and no metrics, the
// built-in location customised, the scheduling values set by hand, and an
// OpenShift-style security context (no fixed UID or group: restricted-v2 assigns one)
// with a NetworkPolicy that knows the API servers' addresses.
const externalIssuerValues = `
replicaCount: 1
podSecurityContext:
  runAsUser: null
  runAsGroup: null
  fsGroup: null
securityContext:
  runAsUser: null
  runAsGroup: null
networkPolicy:
  enabled: true
  webhookFrom:
    - ipBlock:
        cidr: 192.168.10.0/24
  apiServer:
    cidrs: [192.168.10.11/32, 192.168.10.12/32, 192.168.10.13/32]
    ports: [6443]
image:
  digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
leaderElection:
  enabled: false
apiPriority:
  enabled: false
logLevel: 2
metrics:
  enabled: false
resources:
  requests:
    cpu: 50m
    memory: 64Mi
  limits:
    cpu: "1"
    memory: 256Mi
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: kubernetes.io/arch
              operator: In
              values: [amd64, arm64]
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector:
      matchLabels:
        app.kubernetes.io/name: nodegroup-operator
webhook:
  timeoutSeconds: 10
  secretName: operator-webhook-tls
  certManager:
    enabled: true
    issuerRef:
      name: platform-ca
      kind: ClusterIssuer
builtins:
  classes:
    kairos:
      enabled: false
  location:
    inCluster:
      storageClassName: vm-disks
      allowedNamespaces:
        matchLabels:
          nodegroup.io/tenant: "true"
        matchExpressions:
          - key: tier
            operator: NotIn
            values: [frozen]
`

// webhookOffValues: no admission webhook (no Service, configuration, certificate or
// their RBAC), no PodDisruptionBudget, plain HTTP metrics (no metrics RBAC, a
// ServiceMonitor without TLS or token, alerts without the webhook's), and no binding of
// the catalog reader.
const webhookOffValues = `
webhook:
  enabled: false
tenantCatalog:
  enabled: false
podDisruptionBudget:
  enabled: false
metrics:
  secure: false
  serviceMonitor:
    enabled: true
  prometheusRule:
    enabled: true
`

func parseValues(t *testing.T, s string) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValues([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func loadChart(t *testing.T) *chart.Chart { t.Helper(); return loadDir(t, chartDir()) }

// loadDir loads the chart in dir, with its dependencies under charts/.
func loadDir(t *testing.T, dir string) *chart.Chart {
	t.Helper()
	c, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("loading the chart %s: %v", dir, err)
	}
	return c
}

// renderValues builds what templates see, as `helm install` does: the chart's values
// coalesced with the user's and checked against values.schema.json.
// Dependencies whose condition is false are dropped first, as action.Install does.
func renderValues(c *chart.Chart, vals map[string]any) (chartutil.Values, error) {
	if err := chartutil.ProcessDependenciesWithMerge(c, vals); err != nil {
		return nil, err
	}
	return chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true,
	}, nil)
}

// render renders the chart's templates with vals; the result maps template paths to
// their output.
func render(t *testing.T, vals map[string]any) map[string]string {
	t.Helper()
	return renderChart(t, loadChart(t), vals)
}

// renderChart renders c's templates, and its enabled dependencies', with vals.
func renderChart(t *testing.T, c *chart.Chart, vals map[string]any) map[string]string {
	t.Helper()
	rv, err := renderValues(c, vals)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	out, err := engine.Render(c, rv)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	return out
}

// manifest is the rendered output as `helm template` prints it: every template with
// output, in path order, under a "# Source:" line. NOTES.txt is included last so its
// text is reviewed with the objects.
func manifest(out map[string]string) []byte {
	var b bytes.Buffer
	var notes string
	for _, name := range slices.Sorted(maps.Keys(out)) {
		body := strings.TrimSpace(out[name])
		if body == "" {
			continue
		}
		if strings.HasSuffix(name, "NOTES.txt") {
			notes = body
			continue
		}
		for _, doc := range splitDocuments(body) {
			b.WriteString("---\n# Source: " + name + "\n" + doc + "\n")
		}
	}
	if notes != "" {
		b.WriteString("---\n# NOTES.txt\n")
		for _, line := range strings.Split(notes, "\n") {
			b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
	}
	return b.Bytes()
}

// splitDocuments splits a template's output into its non-empty YAML documents.
func splitDocuments(s string) []string {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	var docs []string
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			panic(err)
		}
		if d := strings.TrimSpace(stripComments(string(doc))); d != "" {
			docs = append(docs, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(doc)), "---")))
		}
	}
}

// stripComments drops whole-line comments, to tell an empty document from a real one.
func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") || t == "---" {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// objects decodes every rendered object, in template path order.
func objects(t *testing.T, out map[string]string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for _, doc := range splitDocuments(out[name]) {
			obj := &unstructured.Unstructured{}
			if err := yaml.UnmarshalStrict([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			if obj.GetKind() == "" || obj.GetAPIVersion() == "" || obj.GetName() == "" {
				t.Fatalf("%s: an object without kind, apiVersion or name:\n%s", name, doc)
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

// find returns the one rendered object of a kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}
