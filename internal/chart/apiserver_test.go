package chart

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The API server has this project's CRDs and the Cluster API provider CRDs; the
	// chart's objects are checked against it.
	testenv.Main(m, true, func(e *testenv.Env) error { env = e; return nil })
}

// noCRDOnTestServer are the only kinds the chart renders that the test API server cannot
// check: cert-manager and the Prometheus Operator are not installed there, and their
// CRDs are not part of this project. Every other kind is checked.
var noCRDOnTestServer = map[schema.GroupKind]bool{
	{Group: "cert-manager.io", Kind: "Issuer"}:               true,
	{Group: "cert-manager.io", Kind: "Certificate"}:          true,
	{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}: true,
	{Group: "monitoring.coreos.com", Kind: "PrometheusRule"}: true,
}

// warningRecorder keeps the warnings the API server returns (deprecated APIs, unknown
// fields, Pod Security violations), which a client would otherwise only log.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	msgs := w.msgs
	w.msgs = nil
	return msgs
}

// warningClient is an admin client whose warnings are recorded.
func warningClient(t *testing.T) (client.Client, *warningRecorder) {
	t.Helper()
	w := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// ensureNamespace creates a namespace that enforces and warns on the restricted Pod
// Security Standard, so a pod template that breaks it is reported by the API server.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// valueCases are the renders checked against the API server and compared with golden
// files. Between them they take every branch of the templates.
var valueCases = []struct {
	name, values string
	// skipped are the kinds of noCRDOnTestServer this render has.
	skipped []string
}{
	{name: "default"},
	{name: "custom", values: customValues, skipped: []string{"Certificate", "Issuer", "PrometheusRule", "ServiceMonitor"}},
	{name: "external-issuer", values: externalIssuerValues, skipped: []string{"Certificate"}},
	{name: "webhook-off", values: webhookOffValues, skipped: []string{"PrometheusRule", "ServiceMonitor"}},
}

// TestAPIServerAcceptsEveryObject sends every object of each render to kube-apiserver as
// a server-side dry-run with strict field validation: the server decodes, defaults and
// validates it (CRD schemas and CEL rules for the built-ins, webhook configuration
// checks including the matchConditions' CEL, RBAC), without storing it. Any warning
// (unknown field, deprecated API, Pod Security restricted violation) fails too.
func TestAPIServerAcceptsEveryObject(t *testing.T) {
	ensureNamespace(t, releaseNamespace)
	c, warnings := warningClient(t)
	ctx := context.Background()

	// The Pod Security check is live: a pod template without the chart's security
	// context draws a warning from this server.
	probe := find(t, objects(t, render(t, nil)), "Deployment", "nodegroup-operator").DeepCopy()
	probe.SetName("pod-security-probe")
	unstructured.RemoveNestedField(probe.Object, "spec", "template", "spec", "securityContext")
	containers, _, _ := unstructured.NestedSlice(probe.Object, "spec", "template", "spec", "containers")
	delete(containers[0].(map[string]any), "securityContext")
	_ = unstructured.SetNestedSlice(probe.Object, containers, "spec", "template", "spec", "containers")
	if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if w := warnings.take(); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, `violate PodSecurity "restricted`) }) {
		t.Fatalf("the API server did not warn about a pod template without a security context (%q): the Pod Security check below would prove nothing", w)
	}

	// So are strict field validation and the CRDs' CEL rules.
	typo := find(t, objects(t, render(t, nil)), "Service", "nodegroup-operator-webhook").DeepCopy()
	_ = unstructured.SetNestedField(typo.Object, "ClusterIP", "spec", "typ")
	if err := c.Create(ctx, typo, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict)); err == nil || !strings.Contains(err.Error(), `unknown field "spec.typ"`) {
		t.Fatalf("an unknown field was not refused: %v", err)
	}
	talos := find(t, objects(t, render(t, nil)), "NodeGroupClass", "talos").DeepCopy()
	_ = unstructured.SetNestedField(talos.Object, "Kairos", "spec", "os")
	if err := c.Create(ctx, talos, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "the built-in class 'talos' must be exactly {os: Talos}") {
		t.Fatalf("a wrong built-in talos class was not refused by the CRD's CEL rule: %v", err)
	}

	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(t, render(t, parseValues(t, tc.values)))
			checked := 0
			var skipped []string
			for _, obj := range objs {
				gk := obj.GroupVersionKind().GroupKind()
				if noCRDOnTestServer[gk] {
					skipped = append(skipped, gk.Kind)
					continue
				}
				if err := c.Create(ctx, obj.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
					t.Errorf("%s %s refused: %v", obj.GetKind(), obj.GetName(), err)
				}
				for _, w := range warnings.take() {
					t.Errorf("%s %s: warning: %s", obj.GetKind(), obj.GetName(), w)
				}
				checked++
			}
			slices.Sort(skipped)
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skipped kinds %v, want exactly %v", skipped, tc.skipped)
			}
			if checked+len(skipped) != len(objs) || checked == 0 {
				t.Errorf("checked %d and skipped %d of %d objects", checked, len(skipped), len(objs))
			}
			t.Logf("%d objects accepted by the API server, %d skipped (%v)", checked, len(skipped), skipped)
		})
	}
}
