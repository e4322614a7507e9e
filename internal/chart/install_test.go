package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/releaseutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook/certs"
)

// install creates the objects of a render for real, in the order `helm install` creates
// them (releaseutil.InstallOrder: RBAC, then Services and the Deployment, then the
// webhook configuration, then custom resources), and deletes them when the test ends.
func install(t *testing.T, out map[string]string) []*unstructured.Unstructured {
	t.Helper()
	files := map[string]string{}
	for name, body := range out {
		if !strings.HasSuffix(name, "NOTES.txt") { // helm install keeps NOTES.txt out of the release's objects
			files[name] = body
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var created []*unstructured.Unstructured
	t.Cleanup(func() {
		for _, obj := range slices.Backward(created) {
			if err := env.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	})
	for _, m := range manifests {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m.Content), &obj.Object); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if err := env.Client.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Fatalf("installing %s %s (%s): %v", obj.GetKind(), obj.GetName(), m.Name, err)
		}
		created = append(created, obj)
	}
	return created
}

// TestInstall installs the default render for real, in Helm's order, on a server where
// no operator runs, and checks what the platform would see right after `helm install`.
func TestInstall(t *testing.T) {
	ensureNamespace(t, releaseNamespace)
	ctx := context.Background()
	out := render(t, nil)
	objs := objects(t, out)
	install(t, out) // fails if any object, the built-ins last, is refused

	t.Run("built-ins are installed, kept on uninstall", func(t *testing.T) {
		for _, name := range []string{v1.BuiltinTalosClass, v1.BuiltinKairosClass} {
			class := &v1.NodeGroupClass{}
			if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
				t.Fatal(err)
			}
			if class.Annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("class %s is not kept on uninstall: %v", name, class.Annotations)
			}
		}
		loc := &v1.Location{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: v1.BuiltinLocation}, loc); err != nil {
			t.Fatal(err)
		}
		if loc.Annotations["helm.sh/resource-policy"] != "keep" || loc.Spec.Provider.Type != v1.ProviderKubeVirt ||
			loc.Spec.AllowedNamespaces == nil || len(loc.Spec.AllowedNamespaces.MatchLabels)+len(loc.Spec.AllowedNamespaces.MatchExpressions) != 0 {
			t.Errorf("location in-cluster: %+v %v", loc.Spec, loc.Annotations)
		}
	})

	// No replica serves the webhook here, so every request sent to it fails, and
	// failurePolicy Fail refuses it: what is sent and what is not is visible.
	t.Run("webhook fails closed for pools and for classes with poolRules", func(t *testing.T) {
		ensureNamespace(t, "tenant-install")
		pool := fromYAML(t, `
apiVersion: nodegroup.io/v1alpha1
kind: NodeGroup
metadata: {namespace: tenant-install, name: workers}
spec:
  clusterName: tenant
  minReplicas: 3
  maxReplicas: 3
  resources: {cpu: "2", memory: 4Gi}
  roles: [worker]
`)
		err := env.Client.Create(ctx, pool, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "nodegroups.validate.nodegroup.io"`) {
			t.Errorf("a NodeGroup was not sent to the webhook: %v", err)
		}
		ruled := &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "ruled"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos}}
		ruled.Spec.PoolRules = []v1.PoolRule{{Rule: "object.spec.maxReplicas <= 10", Message: "at most 10 workers: lower spec.maxReplicas"}}
		err = env.Client.Create(ctx, ruled, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "nodegroupclasses.validate.nodegroup.io"`) {
			t.Errorf("a class with poolRules was not sent to the webhook: %v", err)
		}
		plain := &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos}}
		if err := env.Client.Create(ctx, plain, client.DryRunAll); err != nil {
			t.Errorf("a class without poolRules was sent to the webhook: %v", err)
		}
	})

	t.Run("the operator's service account keeps the webhook certificate", func(t *testing.T) {
		deploy := find(t, objs, "Deployment", "nodegroup-operator")
		args := operatorArgs(t, deploy)
		secretName, configName := args["webhook-secret-name"], args["webhook-configuration"]
		dnsNames := strings.Split(args["webhook-dns-names"], ",")
		if args["webhook-manage-certs"] != "true" || secretName == "" || configName == "" || len(dnsNames) != 2 {
			t.Fatalf("the Deployment does not let the operator manage its certificate: %v", args)
		}
		// Impersonating the chart's ServiceAccount, so only the chart's RBAC is granted:
		// the Secret and the configuration are watched by name, written by name.
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + releaseNamespace + ":nodegroup-operator",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"},
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		validity, err := time.ParseDuration(args["webhook-cert-validity"])
		if err != nil {
			t.Fatal(err)
		}
		caValidity, err := time.ParseDuration(args["webhook-ca-validity"])
		if err != nil {
			t.Fatal(err)
		}
		m := &certs.Manager{
			Client:               cs,
			Secret:               types.NamespacedName{Namespace: releaseNamespace, Name: secretName},
			WebhookConfiguration: configName,
			DNSNames:             dnsNames,
			Identity:             "install-test",
			CAValidity:           caValidity,
			CertValidity:         validity,
		}
		mctx, mcancel := context.WithCancel(ctx)
		defer mcancel()
		go func() { _ = m.Start(mctx) }()
		select {
		case <-m.Serving():
		case <-time.After(30 * time.Second):
			t.Fatal("as the operator's service account: no serving certificate after 30s")
		}
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx, m.Secret, secret); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), secret) })
		deadline := time.Now().Add(30 * time.Second)
		for {
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := env.Client.Get(ctx, types.NamespacedName{Name: configName}, vwc); err != nil {
				t.Fatal(err)
			}
			injected := len(vwc.Webhooks) > 0
			for _, w := range vwc.Webhooks {
				injected = injected && bytes.Equal(w.ClientConfig.CABundle, secret.Data[certs.KeyCABundle])
			}
			if injected {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the caBundle is not the Secret's CA bundle after 30s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		mcancel()
	})

	// helm upgrade patches built-in kinds with a three-way strategic merge of the old
	// render, the new render and the live object (helm's kube.Client createPatch). The
	// chart never sets caBundle, so the one the operator wrote must survive an upgrade.
	t.Run("helm upgrade keeps the caBundle the operator wrote", func(t *testing.T) {
		live := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: "nodegroup-operator"}, live); err != nil {
			t.Fatal(err)
		}
		ca := live.Webhooks[0].ClientConfig.CABundle
		if len(ca) == 0 {
			t.Fatal("no caBundle was written, so there is nothing for an upgrade to keep (see the subtest above)")
		}
		original, err := json.Marshal(find(t, objs, "ValidatingWebhookConfiguration", "nodegroup-operator").Object)
		if err != nil {
			t.Fatal(err)
		}
		upgraded := find(t, objects(t, render(t, parseValues(t, "webhook:\n  timeoutSeconds: 10\n"))), "ValidatingWebhookConfiguration", "nodegroup-operator")
		modified, err := json.Marshal(upgraded.Object)
		if err != nil {
			t.Fatal(err)
		}
		current, err := json.Marshal(live)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := strategicpatch.NewPatchMetaFromStruct(&admissionregistrationv1.ValidatingWebhookConfiguration{})
		if err != nil {
			t.Fatal(err)
		}
		patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Patch(ctx, live, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
			t.Fatalf("patch %s: %v", patch, err)
		}
		for _, w := range live.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) || w.TimeoutSeconds == nil || *w.TimeoutSeconds != 10 {
				t.Errorf("after the upgrade, webhook %s: timeout %v, caBundle kept %v", w.Name, w.TimeoutSeconds, bytes.Equal(w.ClientConfig.CABundle, ca))
			}
		}
	})

	t.Run("the operator's service account holds its leader election lease", func(t *testing.T) {
		sa := serviceAccountUser(releaseNamespace, "nodegroup-operator")
		for _, verb := range []string{"get", "create", "update"} {
			expectAccess(t, sa, true, authorizationv1.ResourceAttributes{Namespace: releaseNamespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: "nodegroup-operator.nodegroup.io"})
			expectAccess(t, sa, false, authorizationv1.ResourceAttributes{Namespace: "default", Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: "nodegroup-operator.nodegroup.io"})
		}
	})

	// Secure metrics (the default): the operator checks each scrape with a TokenReview
	// and a SubjectAccessReview, and only a scraper bound to the metrics-reader role
	// may get /metrics.
	t.Run("the operator's service account checks who scrapes its metrics", func(t *testing.T) {
		sa := serviceAccountUser(releaseNamespace, "nodegroup-operator")
		expectAccess(t, sa, true, authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"})
		expectAccess(t, sa, true, authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"})
	})
	t.Run("only a scraper bound to metrics-reader gets the metrics", func(t *testing.T) {
		find(t, objs, "ClusterRole", "nodegroup-operator-metrics-reader")
		prometheus := serviceAccountUser("monitoring", "prometheus")
		other := serviceAccountUser("monitoring", "other")
		expectURLAccess(t, prometheus, false, "get", "/metrics")
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-nodegroup-operator-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nodegroup-operator-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
		}
		if err := env.Client.Create(ctx, crb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crb) })
		// The RBAC authorizer sees the binding through its informer, a moment later.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if allowed, _ := urlAllowed(t, prometheus, "get", "/metrics"); allowed {
				break
			}
		}
		expectURLAccess(t, prometheus, true, "get", "/metrics")
		expectURLAccess(t, prometheus, false, "get", "/debug/pprof/")
		expectURLAccess(t, other, false, "get", "/metrics")
		for _, s := range []subject{prometheus, other} {
			expectAccess(t, s, false, authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"})
		}
	})
}

func fromYAML(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict([]byte(s), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

// operatorArgs are the operator container's --name=value arguments.
func operatorArgs(t *testing.T, deploy *unstructured.Unstructured) map[string]string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	raw, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	args := map[string]string{}
	for _, a := range raw {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			t.Fatalf("argument %q is not --name=value", a)
		}
		args[name] = value
	}
	return args
}

// subject is a user and groups, for SubjectAccessReviews.
type subject struct {
	user   string
	groups []string
}

func serviceAccountUser(ns, name string) subject {
	return subject{user: "system:serviceaccount:" + ns + ":" + name, groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
}

// expectAccess asks the API server's authorizer whether s may do attrs.
func expectAccess(t *testing.T, s subject, want bool, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: s.user, Groups: s.groups, ResourceAttributes: &attrs,
	}}
	if err := env.Client.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	if sar.Status.Allowed != want {
		t.Errorf("%s %s %s/%s %q in %q: allowed=%v, want %v (%s)", s.user, attrs.Verb, attrs.Group, attrs.Resource, attrs.Name, attrs.Namespace, sar.Status.Allowed, want, sar.Status.Reason)
	}
}

// expectURLAccess asks the API server's authorizer whether s may verb the non-resource
// URL path, as controller-runtime's metrics filter asks about each scrape.
func expectURLAccess(t *testing.T, s subject, want bool, verb, path string) {
	t.Helper()
	if allowed, reason := urlAllowed(t, s, verb, path); allowed != want {
		t.Errorf("%s %s %s: allowed=%v, want %v (%s)", s.user, verb, path, allowed, want, reason)
	}
}

func urlAllowed(t *testing.T, s subject, verb, path string) (bool, string) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: s.user, Groups: s.groups, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: verb, Path: path},
	}}
	if err := env.Client.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed, sar.Status.Reason
}
