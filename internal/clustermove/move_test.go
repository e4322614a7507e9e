// Package clustermove_test moves a tenant cluster with its pools between two management
// API servers with clusterctl's own library (ObjectMover().Move), the operator's pool
// and join-identity controllers running against each, and checks that neither side
// does anything the move did not ask for: the source writes nothing for the moved
// cluster (no MachineDeployment or template made again, no token taken out of the
// tenant), and the target resumes the pools without a roll.
//
// Cluster API's manager does not run here (the e2e suite runs it): the test makes what
// it would (the Cluster's provisioned status, its owner references on the control plane
// and infrastructure cluster, a MachineSet and a Machine with its Node per pool), since
// clusterctl moves only what is provisioned and follows owner references. So the
// Machines' names and UIDs after the move prove the move carried them and that the
// operator left them alone, not what Cluster API would do with them.
package clustermove_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/config"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// side is one management cluster with the operator's controllers.
type side struct {
	env    *testenv.Env
	writes testenv.WriteCounter
	// kubeconfig is its admin kubeconfig's path, for clusterctl.
	kubeconfig string
	// conns are the join-identity controller's tenant connections, closed at the end
	// (their watches would hold the tenant API server's shutdown).
	conns *tenant.Connections
}

var source, target side

// providerNames are the names clusterctl init gives the providers whose CRDs the tests
// install, by API group.
var providerNames = map[string]string{
	"cluster.x-k8s.io":                "cluster-api",
	"addons.cluster.x-k8s.io":         "cluster-api",
	"ipam.cluster.x-k8s.io":           "cluster-api",
	"runtime.cluster.x-k8s.io":        "cluster-api",
	"infrastructure.cluster.x-k8s.io": "infrastructure-kubevirt",
	"controlplane.cluster.x-k8s.io":   "control-plane-kamaji",
}

// labelAsInstalled labels a provider CRD as clusterctl init labels every object of a
// provider it installs: clusterctl.cluster.x-k8s.io and cluster.x-k8s.io/provider. The
// move discovers the kinds of the CRDs with the first.
func labelAsInstalled(crd *apiextensionsv1.CustomResourceDefinition) {
	provider := providerNames[crd.Spec.Group]
	if provider == "" {
		provider = "bootstrap-" + strings.TrimSuffix(crd.Spec.Names.Singular, "configtemplate")
		provider = strings.TrimSuffix(provider, "config")
	}
	if crd.Labels == nil {
		crd.Labels = map[string]string{}
	}
	crd.Labels[clusterctlv1.ClusterctlLabel] = ""
	crd.Labels[clusterv1.ProviderNameLabel] = provider
}

// clusterctlCRDs is clusterctl's Provider inventory CRD, which both sides need.
func clusterctlCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range strings.Split(string(clusterctlconfig.ClusterctlAPIManifest), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal([]byte(doc), crd); err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

func (s *side) run(dir, name string) error {
	s.kubeconfig = filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(s.kubeconfig, s.env.KubeConfig(), 0o600); err != nil {
		return err
	}
	status := tenant.NewStatus()
	// testenv.RunOperator's manager, but for the name check: the two sides run
	// controllers of the same names in one process.
	opts := operator.ManagerOptions()
	opts.NewClient = s.writes.NewClient
	opts.Controller.SkipNameValidation = ptr.To(true)
	return s.env.RunManager(opts, func(mgr ctrl.Manager) error {
		if err := operator.RegisterIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return err
		}
		pools := &nodegroup.Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Catalog: catalog.Default(), Tenants: status,
			ManagementDNS: client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, ManagementDNSDomain: "cluster.local",
		}
		if err := pools.Register(mgr, 2); err != nil {
			return err
		}
		s.conns = &tenant.Connections{Secrets: mgr.GetAPIReader(), UserAgent: "nodegroup-operator"}
		return (&joinidentity.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Status: status, Conns: s.conns}).Register(mgr)
	})
}

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		source.env = e
		ctx := context.Background()
		dir, err := os.MkdirTemp("", "clustermove-")
		if err != nil {
			return err
		}
		inventory, err := clusterctlCRDs()
		if err != nil {
			return err
		}
		for _, crd := range inventory {
			if err := e.Client.Create(ctx, crd.DeepCopy()); err != nil {
				return err
			}
		}
		// The source's provider CRDs are installed already: label them in place.
		var crds apiextensionsv1.CustomResourceDefinitionList
		if err := e.Client.List(ctx, &crds); err != nil {
			return err
		}
		for i := range crds.Items {
			crd := &crds.Items[i]
			if strings.HasSuffix(crd.Spec.Group, "cluster.x-k8s.io") && crd.Spec.Group != "clusterctl.cluster.x-k8s.io" {
				labelAsInstalled(crd)
				if err := e.Client.Update(ctx, crd); err != nil {
					return err
				}
			}
		}
		providers, err := testenv.ProviderCRDs()
		if err != nil {
			return err
		}
		for _, crd := range providers {
			labelAsInstalled(crd)
		}
		t, err := testenv.Start(testenv.Options{CRDs: append(providers, inventory...)})
		if err != nil {
			return err
		}
		target.env = t
		e.BeforeStop(func() { _ = t.Stop() })
		if err := source.run(dir, "source"); err != nil {
			return err
		}
		return target.run(dir, "target")
	})
}

// provision sets what Cluster API's manager would on the tenant's Cluster for
// clusterctl to move it: its control plane and infrastructure cluster owned by it, and
// its status provisioned.
func provision(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster}, cl); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []clusterv1.ContractVersionedObjectReference{cl.Spec.ControlPlaneRef, cl.Spec.InfrastructureRef} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(map[string]schema.GroupVersionKind{
			"KamajiControlPlane": {Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha2", Kind: "KamajiControlPlane"},
			"KubevirtCluster":    {Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtCluster"},
		}[ref.Kind])
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, u); err != nil {
			t.Fatal(err)
		}
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cl.Name, UID: cl.UID}})
		if err := c.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	cl.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	cl.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition,
		Status: metav1.ConditionTrue, Reason: clusterv1.ClusterControlPlaneInitializedReason})
	if err := c.Status().Update(ctx, cl); err != nil {
		t.Fatal(err)
	}
}

// resumeWrite is md without what the target's operator writes when it resumes a moved
// pool: the body digest of apply.AnnotationApplied covers the owner reference, whose
// NodeGroup UID the move changed, so the operator stamps each MachineDeployment once
// more, metadata only (the spec digest and the generation stay: no roll).
func resumeWrite(md *clusterv1.MachineDeployment) *clusterv1.MachineDeployment {
	md = md.DeepCopy()
	md.ResourceVersion, md.ManagedFields = "", nil
	if v, ok := md.Annotations[apply.AnnotationApplied]; ok {
		_, md.Annotations[apply.AnnotationApplied], _ = strings.Cut(v, "/")
	}
	return md
}

// pools is what a side holds of the namespace's pools: each MachineDeployment's spec,
// and the names of the templates.
func pools(t *testing.T, c client.Client, ns string) (map[string]clusterv1.MachineDeploymentSpec, []string) {
	t.Helper()
	ctx := context.Background()
	var mds clusterv1.MachineDeploymentList
	if err := c.List(ctx, &mds, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	specs := map[string]clusterv1.MachineDeploymentSpec{}
	for _, md := range mds.Items {
		specs[md.Name] = md.Spec
	}
	var names []string
	var tcs talos.TalosConfigTemplateList
	if err := c.List(ctx, &tcs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, x := range tcs.Items {
		names = append(names, x.Name)
	}
	var kmts capk.KubevirtMachineTemplateList
	if err := c.List(ctx, &kmts, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, x := range kmts.Items {
		names = append(names, x.Name)
	}
	slices.Sort(names)
	return specs, names
}

// machines makes, for each of the namespace's MachineDeployments, a MachineSet it
// controls and a Machine of that set with its Node, as Cluster API's manager would.
func machines(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	var mds clusterv1.MachineDeploymentList
	if err := c.List(ctx, &mds, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range mds.Items {
		md := &mds.Items[i]
		labels := map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name}
		for k, v := range md.Spec.Template.Labels {
			labels[k] = v
		}
		ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: md.Name + "-1", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(md, clusterv1.GroupVersion.WithKind("MachineDeployment"))}},
			Spec: clusterv1.MachineSetSpec{ClusterName: md.Spec.ClusterName, Replicas: ptr.To[int32](1),
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name}},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels}, Spec: md.Spec.Template.Spec}}}
		if err := c.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ms.Name + "-a", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ms, clusterv1.GroupVersion.WithKind("MachineSet"))}},
			Spec: clusterv1.MachineSpec{ClusterName: md.Spec.ClusterName, Version: md.Spec.Template.Spec.Version,
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(ms.Name + "-a")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachine", Name: ms.Name + "-a"}}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: m.Name}
		if err := c.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// machineUIDs are the namespace's Machines: name and UID.
func machineUIDs(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	var list clusterv1.MachineList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range list.Items {
		out[m.Name] = string(m.UID)
	}
	return out
}

func TestMoveCarriesPoolsWithoutARoll(t *testing.T) {
	ctx := context.Background()
	ns := "moved"
	key := client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster}
	t.Cleanup(func() { source.conns.Close(key); target.conns.Close(key) })
	// The tenant cluster is the source API server itself: its kube-system holds the
	// bootstrap token.
	if err := testenv.CreateTenant(ctx, source.env.Client, ns, testenv.TenantOptions{Kubeconfig: source.env.KubeConfig()}); err != nil {
		t.Fatal(err)
	}
	// The target is a management cluster prepared as the README says: the platform's
	// built-in location and DNS, and the tenant API server's Service, which clusterctl
	// does not move, at the addresses they have on the source (a Talos worker's config
	// names both: other addresses render other templates, and roll every pool once).
	once, objs, err := testenv.TenantObjects(ns, testenv.TenantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range append(once, objs...) {
		if svc, ok := obj.(*corev1.Service); ok {
			src := &corev1.Service{}
			if err := source.env.Client.Get(ctx, client.ObjectKeyFromObject(svc), src); err != nil {
				t.Fatal(err)
			}
			svc.Spec.ClusterIP = src.Spec.ClusterIP
		}
		switch obj.(type) {
		case *corev1.Namespace, *corev1.Service, *v1.Location:
			if err := target.env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	provision(t, source.env.Client, ns)
	for _, name := range []string{"web", "batch"} {
		ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
			ClusterName: testenv.TenantCluster, NodeGroupClassName: v1.BuiltinTalosClass, LocationName: v1.BuiltinLocation,
			MinReplicas: 1, MaxReplicas: 3,
			Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
		}}
		source.env.MustCreate(t, ng)
	}
	testenv.Eventually(t, "both pools rendered on the source", func() bool {
		specs, _ := pools(t, source.env.Client, ns)
		return len(specs) == 2
	})
	var identity corev1.Secret
	testenv.Eventually(t, "the join identity minted", func() bool {
		return source.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster + resolve.TalosSecretSuffix}, &identity) == nil
	})
	token := string(identity.Data[resolve.TalosKeyBootstrapToken])
	tokenKey := client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + token[:6]}
	testenv.Eventually(t, "the tenant holds the token", func() bool {
		return source.env.Client.Get(ctx, tokenKey, &corev1.Secret{}) == nil
	})
	machines(t, source.env.Client, ns)
	testenv.WaitQuiet(t, "the source's writes", source.writes.Load)
	beforeSpecs, beforeTemplates := pools(t, source.env.Client, ns)
	beforeMachines := machineUIDs(t, source.env.Client, ns)

	cfg, err := config.New(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	from := cluster.New(cluster.Kubeconfig{Path: source.kubeconfig}, cfg)
	to := cluster.New(cluster.Kubeconfig{Path: target.kubeconfig}, cfg)
	targetWrites := target.writes.Load()
	start := time.Now()
	if err := from.ObjectMover().Move(ctx, ns, to, false); err != nil {
		t.Fatalf("clusterctl move: %v", err)
	}
	t.Logf("moved in %s", time.Since(start).Round(time.Millisecond))
	// The MachineDeployments as clusterctl made them on the target, before its operator
	// resumes the pools, so that a write on resume is seen.
	var mds clusterv1.MachineDeploymentList
	if err := target.env.Client.List(ctx, &mds, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	moved := map[string]clusterv1.MachineDeployment{}
	for _, md := range mds.Items {
		moved[md.Name] = md
	}
	sourceWrites := source.writes.Load()

	// The source: nothing of the moved cluster is left or made again.
	time.Sleep(3 * time.Second)
	testenv.WaitQuiet(t, "the source's writes", source.writes.Load)
	if specs, templates := pools(t, source.env.Client, ns); len(specs)+len(templates) != 0 {
		t.Errorf("left or made again on the source: MachineDeployments %v, templates %v", specs, templates)
	}
	var left v1.NodeGroupList
	if err := source.env.Client.List(ctx, &left, client.InNamespace(ns)); err != nil || len(left.Items) != 0 {
		t.Errorf("pools left on the source: %d (%v)", len(left.Items), err)
	}
	if n := source.writes.Load() - sourceWrites; n != 0 {
		t.Errorf("the source's operator wrote %d times after the move", n)
	}
	if err := source.env.Client.Get(ctx, tokenKey, &corev1.Secret{}); err != nil {
		t.Errorf("the tenant's bootstrap token after the move: %v", err)
	}

	// The target: resumed, the same objects, nothing written to them.
	cl := &clusterv1.Cluster{}
	if err := target.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster}, cl); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(cl.Spec.Paused, false) {
		t.Fatal("the target's Cluster is still paused")
	}
	testenv.Eventually(t, "the target's pools resumed (rendered, not paused)", func() bool {
		var list v1.NodeGroupList
		if err := target.env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 2 {
			return false
		}
		for _, ng := range list.Items {
			if meta.FindStatusCondition(ng.Status.Conditions, clusterv1.PausedCondition) != nil ||
				!meta.IsStatusConditionTrue(ng.Status.Conditions, v1.ConditionRendered) {
				return false
			}
		}
		return true
	})
	movedMachines := machineUIDs(t, target.env.Client, ns)
	if len(movedMachines) != len(beforeMachines) {
		t.Errorf("Machines %v on the source, %v on the target", beforeMachines, movedMachines)
	}
	for name := range beforeMachines {
		if movedMachines[name] == "" {
			t.Errorf("Machine %s did not move", name)
		}
	}
	time.Sleep(3 * time.Second) // settle
	testenv.WaitQuiet(t, "the target's writes", target.writes.Load)
	afterSpecs, afterTemplates := pools(t, target.env.Client, ns)
	if fmt.Sprint(afterTemplates) != fmt.Sprint(beforeTemplates) {
		t.Errorf("templates: %v on the source, %v on the target", beforeTemplates, afterTemplates)
	}
	for name, spec := range beforeSpecs {
		got, ok := afterSpecs[name]
		if !ok || got.Template.Spec.Bootstrap.ConfigRef.Name != spec.Template.Spec.Bootstrap.ConfigRef.Name ||
			got.Template.Spec.InfrastructureRef.Name != spec.Template.Spec.InfrastructureRef.Name {
			t.Errorf("MachineDeployment %s: template refs %+v on the target, %+v on the source", name, got.Template.Spec, spec.Template.Spec)
		}
	}
	if err := target.env.Client.List(ctx, &mds, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, md := range mds.Items {
		if was, ok := moved[md.Name]; !ok || !equality.Semantic.DeepEqual(resumeWrite(&was), resumeWrite(&md)) {
			t.Errorf("MachineDeployment %s was written on the target after the move: %+v, then %+v", md.Name, was.ObjectMeta, md.ObjectMeta)
		}
	}
	if after := machineUIDs(t, target.env.Client, ns); fmt.Sprint(after) != fmt.Sprint(movedMachines) {
		t.Errorf("the target's Machines changed after it resumed: %v, then %v", movedMachines, after)
	}
	t.Logf("the target's operator sent %d writes from the move on (pools' status, Paused and resumed)", target.writes.Load()-targetWrites)
	var id corev1.Secret
	if err := target.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster + resolve.TalosSecretSuffix}, &id); err != nil ||
		string(id.Data[resolve.TalosKeyBootstrapToken]) != token {
		t.Errorf("the target's join identity: %v, token kept %v", err, string(id.Data[resolve.TalosKeyBootstrapToken]) == token)
	}
	// The target's Cluster has a new UID; its operator adopts the tenant's token, which
	// the moved identity names, so a rotation or the last pool's deletion removes it.
	testenv.Eventually(t, "the tenant's token labelled with the target Cluster's UID", func() bool {
		var s corev1.Secret
		return source.env.Client.Get(ctx, tokenKey, &s) == nil && s.Labels[tenant.LabelCluster] == string(cl.UID)
	})
}
