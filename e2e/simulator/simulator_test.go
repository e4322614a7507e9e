package simulator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// The tests play Cluster API core by hand: they create the Cluster, clone rendered
// templates into a bootstrap config and a KubevirtMachine per Machine, link them to the
// Machine and copy the data Secret name onto it, as the MachineSet and Machine
// controllers do. The simulator does the rest.

const (
	ns      = "tenant-a"
	cluster = "tenant-a"
	// cpVersion is the control plane's release; pools run the catalog's v1.35 patch or,
	// for the Kairos class with its own image, that image's release.
	cpVersion = "v1.35.4"
)

var tenantOnce sync.Once

// tenant creates, once, the namespace and a Cluster with a KubevirtCluster and a
// KamajiControlPlane, as the platform would.
func tenant(t *testing.T) {
	t.Helper()
	var err error
	tenantOnce.Do(func() { err = createCluster(t.Context(), ns, cluster, true) })
	if err != nil {
		t.Fatal(err)
	}
}

func createCluster(ctx context.Context, namespace, name string, withEndpoint bool) error {
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	kc := newObject(simulator.KubevirtClusterGVK, namespace, name)
	kcp := newObject(simulator.KamajiControlPlaneGVK, namespace, name)
	if err := unstructured.SetNestedField(kcp.Object, cpVersion, "spec", "version"); err != nil {
		return err
	}
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: clusterv1.ClusterSpec{
		ClusterNetwork: clusterv1.ClusterNetwork{
			Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.95.0.0/16"}},
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
		},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: simulator.KubevirtClusterGVK.Group, Kind: "KubevirtCluster", Name: name},
		ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: simulator.KamajiControlPlaneGVK.Group, Kind: "KamajiControlPlane", Name: name},
	}}
	if withEndpoint {
		cl.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: name + "." + namespace + ".svc", Port: 6443}
	}
	for _, obj := range []client.Object{kc, kcp, cl} {
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

func TestClusterStandIns(t *testing.T) {
	tenant(t)
	ctx := t.Context()

	kc := eventually(t, "KubevirtCluster ready", func() (*unstructured.Unstructured, bool) {
		o := get(t, simulator.KubevirtClusterGVK, ns, cluster)
		ready, _, _ := unstructured.NestedBool(o.Object, "status", "ready")
		return o, ready
	})
	wantEndpoint := map[string]any{"host": cluster + "." + ns + ".svc", "port": int64(6443)}
	if got, _, _ := unstructured.NestedMap(kc.Object, "spec", "controlPlaneEndpoint"); !reflect.DeepEqual(got, wantEndpoint) {
		t.Errorf("KubevirtCluster endpoint %v, want the Cluster's %v", got, wantEndpoint)
	}

	kcp := eventually(t, "KamajiControlPlane initialized", func() (*unstructured.Unstructured, bool) {
		o := get(t, simulator.KamajiControlPlaneGVK, ns, cluster)
		ok, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "controlPlaneInitialized")
		return o, ok
	})
	status, _, _ := unstructured.NestedMap(kcp.Object, "status")
	for field, want := range map[string]any{
		"ready": true, "version": cpVersion, "externalManagedControlPlane": true,
		"replicas": int64(2), "readyReplicas": int64(2), "availableReplicas": int64(2), "upToDateReplicas": int64(2),
	} {
		if status[field] != want {
			t.Errorf("KamajiControlPlane status.%s = %v, want %v", field, status[field], want)
		}
	}
	if !hasCondition(status, "Available") {
		t.Errorf("KamajiControlPlane has no Available=True condition: %v", status["conditions"])
	}

	secret := eventually(t, "kubeconfig Secret", func() (*corev1.Secret, bool) {
		s := &corev1.Secret{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + "-kubeconfig"}, s)
		return s, err == nil
	})
	if string(secret.Data["value"]) != string(env.KubeConfig()) {
		t.Error("the kubeconfig Secret does not hold Options.Kubeconfig")
	}
	checkClusterSecret(t, secret, "KamajiControlPlane", cluster)

	// An upgrade: the control plane reports the new version at once.
	setVersion := func(v string) {
		p := fmt.Appendf(nil, `{"spec":{"version":%q}}`, v)
		if err := env.Client.Patch(ctx, kcp, client.RawPatch("application/merge-patch+json", p)); err != nil {
			t.Fatal(err)
		}
	}
	setVersion("v1.35.5")
	eventually(t, "control plane status.version follows spec.version", func() (any, bool) {
		v, _, _ := unstructured.NestedString(get(t, simulator.KamajiControlPlaneGVK, ns, cluster).Object, "status", "version")
		return nil, v == "v1.35.5"
	})
	setVersion(cpVersion)

	// A Cluster without an endpoint gets the kubeconfig's server as its endpoint.
	if err := createCluster(ctx, "no-endpoint", "bare", false); err != nil {
		t.Fatal(err)
	}
	host, port := serverOf(t)
	eventually(t, "endpoint from the kubeconfig", func() (any, bool) {
		got, _, _ := unstructured.NestedMap(get(t, simulator.KubevirtClusterGVK, "no-endpoint", "bare").Object, "spec", "controlPlaneEndpoint")
		return nil, reflect.DeepEqual(got, map[string]any{"host": host, "port": port})
	})
}

func TestTalosWorker(t *testing.T) {
	tenant(t)
	in := talosInput(t)
	out := renderPool(t, in)
	tmpl := out.Bootstrap.(*talos.TalosConfigTemplate)
	w := boot(t, out, "workers-talos-0", nil, nil)

	// The data Secret holds the rendered machine config, byte for byte.
	secret := w.dataSecret(t)
	if got := string(secret.Data["value"]); got != tmpl.Spec.Template.Spec.Data {
		t.Errorf("data Secret differs from the rendered machine config:\n%s", got)
	}
	checkClusterSecret(t, secret, "TalosConfig", w.config.GetName())
	if ready, _, _ := unstructured.NestedBool(w.config.Object, "status", "ready"); !ready {
		t.Error("TalosConfig status.ready is not true")
	}

	node := waitNode(t, w.vm.GetName()) // Talos takes the VM's hostname
	checkNode(t, w, node, map[string]string{
		"example.com/team": "payments", "tier": "backend",
		"topology.kubernetes.io/region": "eu-central", "topology.kubernetes.io/zone": "fsn1-a",
	}, []corev1.Taint{
		{Key: "example.com/dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule},
	})
}

func TestKairosWorker(t *testing.T) {
	tenant(t)
	in := kairosInput(t)
	out := renderPool(t, in)
	tmpl := out.Bootstrap.(*kairos.KairosConfigTemplate)
	w := boot(t, out, "workers-kairos-0", nil, nil)

	// The data Secret is a cloud-config carrying the rendered join configuration, files,
	// DNS and user, plus what the provider adds: the node name and the uninitialized taint.
	secret := w.dataSecret(t)
	checkClusterSecret(t, secret, "KairosConfig", w.config.GetName())
	value := string(secret.Data["value"])
	if !strings.HasPrefix(value, "#cloud-config\n") {
		t.Errorf("data Secret is not a cloud-config:\n%s", value)
	}
	var cc map[string]any
	if err := yaml.Unmarshal([]byte(value), &cc); err != nil {
		t.Fatal(err)
	}
	rendered, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(rendered, "spec", "template", "spec")
	var kubeadm map[string]any
	config, _, _ := unstructured.NestedString(cc, "cluster", "config")
	if err := yaml.Unmarshal([]byte(config), &kubeadm); err != nil {
		t.Fatal(err)
	}
	wantJoin := runtime.DeepCopyJSONValue(spec["kubeadm"].(map[string]any)["joinConfiguration"]).(map[string]any)
	reg := wantJoin["nodeRegistration"].(map[string]any)
	reg["name"] = w.machine.Name
	reg["taints"] = append(reg["taints"].([]any), map[string]any{"key": "node.cluster.x-k8s.io/uninitialized", "effect": "NoSchedule"})
	same(t, "cluster.config joinConfiguration", kubeadm["joinConfiguration"], wantJoin)
	same(t, "cluster.config kubernetesVersion", kubeadm["clusterConfiguration"], map[string]any{"kubernetesVersion": w.machine.Spec.Version})
	same(t, "write_files", cc["write_files"], spec["files"])
	dns, _, _ := unstructured.NestedSlice(cc, "stages", "boot")
	same(t, "boot DNS", dns, []any{map[string]any{"name": "Configure DNS resolvers for early boot",
		"dns": map[string]any{"nameservers": spec["dnsServers"], "path": "/etc/resolv.conf"}}})
	same(t, "users", cc["users"], []any{map[string]any{"name": "kairos", "groups": []any{"admin"},
		"ssh_authorized_keys": []any{in.Class.Kairos.SSHAuthorizedKey}}})

	status, _, _ := unstructured.NestedMap(w.config.Object, "status")
	if created, _, _ := unstructured.NestedBool(status, "initialization", "dataSecretCreated"); !created || status["ready"] != true {
		t.Errorf("KairosConfig status %v: want initialization.dataSecretCreated and ready", status)
	}

	node := waitNode(t, w.machine.Name) // the provider names the node after the Machine
	checkNode(t, w, node, map[string]string{"tier": "web"}, []corev1.Taint{
		{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule},
		clusterv1.NodeUninitializedTaint,
	})
	if node.Status.NodeInfo.KubeletVersion == cpVersion {
		t.Errorf("the Kairos pool runs its class image's release, not the control plane's")
	}
}

// TestKubeletRefusesForbiddenLabels: a bootstrap config asking the kubelet for a label it
// may not set itself gets no Node, and the Machine says why.
func TestKubeletRefusesForbiddenLabels(t *testing.T) {
	tenant(t)
	out := renderPool(t, talosInput(t))
	mark := reconcileMark()
	w := boot(t, out, "workers-talos-bad", nil, func(spec map[string]any) {
		data := spec["data"].(string)
		edited := strings.Replace(data, "node-labels: ", "node-labels: node-role.kubernetes.io/worker=,", 1)
		if edited == data {
			t.Fatal("the rendered machine config has no node-labels to edit")
		}
		spec["data"] = edited
	})
	ev := eventually(t, "a KubeletRefused event on the Machine", func() (*eventsv1.Event, bool) {
		var list eventsv1.EventList
		if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i, e := range list.Items {
			if e.Regarding.Name == w.machine.Name && e.Reason == "KubeletRefused" {
				return &list.Items[i], true
			}
		}
		return nil, false
	})
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "node-role.kubernetes.io/worker") {
		t.Errorf("event %s %q", ev.Type, ev.Note)
	}
	quiesce(t, mark, "simulator-node")
	noNode(t, w.vm.GetName())
}

// TestDeletedMachineGetsNoNode: a Node is made once per machine. A Machine being deleted
// gets none back after Cluster API deletes its Node, nor does a gone Machine, nor a live
// Machine whose Node was deleted.
func TestDeletedMachineGetsNoNode(t *testing.T) {
	tenant(t)
	ctx := t.Context()
	out := renderPool(t, talosInput(t))

	w := boot(t, out, "workers-talos-del", nil, nil)
	node := waitNode(t, w.vm.GetName())
	// Cluster API's own finalizer keeps a deleted Machine around while it cleans up.
	patch(t, w.machine, func() { w.machine.Finalizers = append(w.machine.Finalizers, clusterv1.MachineFinalizer) })

	mark := reconcileMark()
	for _, obj := range []client.Object{w.machine, w.vm, w.config, node} {
		if err := env.Client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	quiesce(t, mark, "simulator-node")
	noNode(t, node.Name)

	mark = reconcileMark()
	patch(t, w.machine, func() { w.machine.Finalizers = nil })
	quiesce(t, mark, "simulator-node")
	noNode(t, node.Name)

	// A Machine deleted while its VM boots never gets a Node, even once the VM is ready.
	late := boot(t, out, "workers-talos-late", func(m *clusterv1.Machine) {
		patch(t, m, func() { m.Finalizers = append(m.Finalizers, clusterv1.MachineFinalizer) })
		if err := env.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}, nil)
	mark = reconcileMark()
	touch(t, late.machine, late.vm)
	quiesce(t, mark, "simulator-node")
	noNode(t, late.vm.GetName())
	patch(t, late.machine, func() { late.machine.Finalizers = nil })

	// A live Machine's deleted Node stays deleted, as a lost worker's would.
	live := boot(t, out, "workers-talos-lost", nil, nil)
	lost := waitNode(t, live.vm.GetName())
	if err := env.Client.Delete(ctx, lost); err != nil {
		t.Fatal(err)
	}
	mark = reconcileMark()
	touch(t, live.machine, live.vm)
	quiesce(t, mark, "simulator-node", "simulator-kubevirtmachine")
	noNode(t, lost.Name)
}

// TestSteadyStateWritesNothing: once everything is up, events on every watched object
// reconcile without a single write.
func TestSteadyStateWritesNothing(t *testing.T) {
	tenant(t)
	w := boot(t, renderPool(t, kairosInput(t)), "workers-kairos-steady", nil, nil)
	waitNode(t, w.machine.Name)
	quiesce(t, reconcileMark())

	before := writes.Load()
	mark := reconcileMark()
	cl := &clusterv1.Cluster{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster}, cl); err != nil {
		t.Fatal(err)
	}
	touch(t, w.machine, w.vm, w.config, cl, get(t, simulator.KamajiControlPlaneGVK, ns, cluster), get(t, simulator.KubevirtClusterGVK, ns, cluster))
	quiesce(t, mark, "simulator-node", "simulator-kubevirtmachine", "simulator-kairosconfig", "simulator-cluster")
	if n := writes.Load() - before; n != 0 {
		t.Errorf("the simulator wrote %d times in a steady state", n)
	}
}

// worker is one Machine with its bootstrap config and infrastructure machine.
type worker struct {
	machine    *clusterv1.Machine
	config, vm *unstructured.Unstructured
	md         *clusterv1.MachineDeployment
}

// boot plays Cluster API core for one Machine of the rendered pool, up to the point where
// the simulator makes the VM ready: the clones, the Machine, the owner references, and
// the data Secret's name on the Machine once the bootstrap config reports it. beforeData
// runs just before that last step, edit on the bootstrap config's spec before it is made.
func boot(t *testing.T, out *render.Output, name string, beforeData func(*clusterv1.Machine), edit func(spec map[string]any)) *worker {
	t.Helper()
	ctx := t.Context()
	md := out.MachineDeployment
	var gvk schema.GroupVersionKind
	switch out.Bootstrap.(type) {
	case *talos.TalosConfigTemplate:
		gvk = simulator.TalosConfigGVK
	case *kairos.KairosConfigTemplate:
		gvk = simulator.KairosConfigGVK
	}
	config := clone(t, out.Bootstrap, gvk, name)
	if edit != nil {
		spec, _, _ := unstructured.NestedMap(config.Object, "spec")
		edit(spec)
		if err := unstructured.SetNestedMap(config.Object, spec, "spec"); err != nil {
			t.Fatal(err)
		}
	}
	vm := clone(t, out.Infrastructure, simulator.KubevirtMachineGVK, name)

	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: md.Spec.Template.Labels}, Spec: *md.Spec.Template.Spec.DeepCopy()}
	m.Spec.Bootstrap.ConfigRef.Kind = gvk.Kind
	m.Spec.Bootstrap.ConfigRef.Name = name
	m.Spec.InfrastructureRef.Kind = simulator.KubevirtMachineGVK.Kind
	m.Spec.InfrastructureRef.Name = name
	for _, obj := range []client.Object{config, vm, m} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	owner := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	for _, obj := range []*unstructured.Unstructured{config, vm} {
		patch(t, obj, func() { obj.SetOwnerReferences([]metav1.OwnerReference{owner}) })
	}

	w := &worker{machine: m, md: md}
	w.config = eventually(t, gvk.Kind+" reports its data Secret", func() (*unstructured.Unstructured, bool) {
		o := get(t, gvk, ns, name)
		s, _, _ := unstructured.NestedString(o.Object, "status", "dataSecretName")
		return o, s == name
	})
	if ready, _, _ := unstructured.NestedBool(get(t, simulator.KubevirtMachineGVK, ns, name).Object, "status", "ready"); ready {
		t.Error("the KubevirtMachine is ready before its Machine has bootstrap data")
	}
	if beforeData != nil {
		beforeData(m)
	}
	patch(t, m, func() { m.Spec.Bootstrap.DataSecretName = ptr.To(name) })

	w.vm = eventually(t, "KubevirtMachine ready", func() (*unstructured.Unstructured, bool) {
		o := get(t, simulator.KubevirtMachineGVK, ns, name)
		ready, _, _ := unstructured.NestedBool(o.Object, "status", "ready")
		return o, ready
	})
	if id, _, _ := unstructured.NestedString(w.vm.Object, "spec", "providerID"); id != "kubevirt://"+name {
		t.Errorf("providerID %q, want kubevirt://%s", id, name)
	}
	return w
}

func (w *worker) dataSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: w.config.GetName()}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkNode holds what every simulated Node must be: exactly the labels and taints the
// bootstrap data asks for (plus the kubelet's own labels), the Machine's version, the
// infrastructure machine's providerID, kwok's annotation, Ready, and the VM's size less
// the kubelet's reservations: the allocatable the autoscaler's annotations promise.
func checkNode(t *testing.T, w *worker, node *corev1.Node, labels map[string]string, taints []corev1.Taint) {
	t.Helper()
	want := map[string]string{
		"kubernetes.io/hostname": node.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
	}
	for k, v := range labels {
		want[k] = v
	}
	same(t, "Node labels", node.Labels, want)
	// The API server's TaintNodesByCondition admission adds not-ready to every new Node;
	// kube-controller-manager (not run here) removes it once the Node is Ready.
	taints = append(slices.Clone(taints), corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	same(t, "Node taints", node.Spec.Taints, taints)
	if got := node.Status.NodeInfo.KubeletVersion; got != w.machine.Spec.Version {
		t.Errorf("kubeletVersion %q, want the Machine's %q", got, w.machine.Spec.Version)
	}
	if want, _, _ := unstructured.NestedString(w.vm.Object, "spec", "providerID"); node.Spec.ProviderID != want {
		t.Errorf("Node providerID %q, want %q", node.Spec.ProviderID, want)
	}
	if node.Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Errorf("Node annotations %v: no kwok.x-k8s.io/node=fake", node.Annotations)
	}
	if i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady }); i < 0 || node.Status.Conditions[i].Status != corev1.ConditionTrue {
		t.Errorf("Node is not Ready: %v", node.Status.Conditions)
	}
	a := w.md.Annotations
	for name, annotation := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: a[render.AnnotationCapacityCPU], corev1.ResourceMemory: a[render.AnnotationCapacityMemory], corev1.ResourcePods: a[render.AnnotationCapacityMaxPods],
	} {
		got := node.Status.Allocatable[name]
		if got.Cmp(resource.MustParse(annotation)) != 0 {
			t.Errorf("Node allocatable %s = %s, the autoscaler annotation says %s", name, got.String(), annotation)
		}
	}
	recorded := eventually(t, "the KubevirtMachine records its Node", func() (string, bool) {
		n := get(t, simulator.KubevirtMachineGVK, ns, w.vm.GetName()).GetAnnotations()[simulator.AnnotationSimulatedNode]
		return n, n != ""
	})
	if recorded != node.Name {
		t.Errorf("the KubevirtMachine records Node %q, want %q", recorded, node.Name)
	}
}

func checkClusterSecret(t *testing.T, s *corev1.Secret, ownerKind, ownerName string) {
	t.Helper()
	if s.Type != clusterv1.ClusterSecretType || s.Labels[clusterv1.ClusterNameLabel] != cluster {
		t.Errorf("Secret %s: type %q, labels %v", s.Name, s.Type, s.Labels)
	}
	if c := metav1.GetControllerOf(s); c == nil || c.Kind != ownerKind || c.Name != ownerName {
		t.Errorf("Secret %s is controlled by %v, want %s %s", s.Name, c, ownerKind, ownerName)
	}
}

// Render inputs: a Talos pool at a location with a region and zone, tenant labels, taints
// and a role (which Cluster API syncs, not the kubelet); a Kairos pool on a class with its
// own image (another release than the control plane's).

func talosInput(t *testing.T) *render.Input {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "internal", "render", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cat := catalog.Default()
	rel, ok := cat.Lookup("v1.35")
	if !ok {
		t.Fatal("catalog has no v1.35")
	}
	return &render.Input{
		Namespace: ns, Name: "workers",
		Spec: v1.NodeGroupSpec{
			ClusterName: cluster, NodeGroupClassName: "talos", LocationName: "fsn1", MinReplicas: 1, MaxReplicas: 3,
			Resources:        &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
			EphemeralStorage: resource.MustParse("20Gi"),
			Roles:            []string{"worker"},
			Labels:           map[string]v1.LabelValue{"example.com/team": "payments", "tier": "backend"},
			Taints:           []v1.Taint{{Key: "example.com/dedicated", Value: "payments", Effect: "NoSchedule"}, {Key: "spot", Effect: "PreferNoSchedule"}},
		},
		ClassName: "talos", Class: v1.NodeGroupClassSpec{OS: v1.OSTalos},
		LocationName: "fsn1",
		Location: v1.LocationSpec{Region: "eu-central", Zone: "fsn1-a", Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt,
			KubeVirt: &v1.KubeVirtProvider{EvictionStrategy: "External"}}},
		Cluster: render.Cluster{
			Name: cluster, ControlPlaneHost: cluster + "." + ns + ".svc", ControlPlanePort: 6443,
			ServiceCIDRs: []string{"10.95.0.0/16"}, PodCIDRs: []string{"10.244.0.0/16"}, DNSDomain: "cluster.local",
			TenantDNS:     "10.95.0.10",
			APIServer:     render.ServiceAddress{Name: cluster, Namespace: ns, ClusterIP: "10.96.12.34"},
			ManagementDNS: "10.96.0.10", ManagementDNSDomain: "cluster.local",
		},
		Release: rel, Factory: cat.TalosFactory, KubernetesVersion: rel.Kubernetes,
		Machine: render.MachineSize{MilliCPU: 2000, MemoryBytes: 4 << 30},
		TalosSecrets: &render.TalosSecrets{
			MachineToken: "w7ysn3.2ti4qmz2k6ajb9nt", MachineCACert: read("machine-ca.crt"), ClusterCACert: read("cluster-ca.crt"),
			ClusterID: "Nhx0p0XcSPVpeFbSiGrMbT6cVTuqc1UwIuJ0jZ_6rzI=", ClusterSecret: "bx4j3zGGpZ1lx1D0dw4XzVLHzJ8lwnhc0eMdQ+k6sF0=",
			BootstrapToken: "abcdef.0123456789abcdef",
		},
	}
}

func kairosInput(t *testing.T) *render.Input {
	in := talosInput(t)
	in.ClassName, in.Spec.NodeGroupClassName = "kairos-own", "kairos-own"
	in.Class = v1.NodeGroupClassSpec{OS: v1.OSKairos,
		Image:  &v1.ClassImage{Reference: "registry.example.com/platform/kairos@sha256:" + strings.Repeat("cd", 32), KubernetesVersion: "v1.35.2"},
		Kairos: &v1.KairosClassSpec{SSHAuthorizedKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGl8 platform@example.com"},
	}
	in.KubernetesVersion = "v1.35.2"
	in.TalosSecrets = nil
	in.KairosUserSecret = cluster + "-kairos-user"
	in.LocationName, in.Spec.LocationName = "in-cluster", "in-cluster"
	in.Location = v1.LocationSpec{Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{EvictionStrategy: "External"}}}
	in.Spec.Resources = &v1.MachineResources{CPU: resource.MustParse("4"), Memory: resource.MustParse("8Gi")}
	in.Machine = render.MachineSize{MilliCPU: 4000, MemoryBytes: 8 << 30}
	in.Spec.Labels = map[string]v1.LabelValue{"tier": "web"}
	in.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "web", Effect: "NoSchedule"}}
	return in
}

func renderPool(t *testing.T, in *render.Input) *render.Output {
	t.Helper()
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// clone is what Cluster API makes of a template for one Machine.
func clone(t *testing.T, tmpl any, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(u, "spec", "template", "spec")
	obj := newObject(gvk, ns, name)
	obj.SetLabels(map[string]string{clusterv1.ClusterNameLabel: cluster})
	if err := unstructured.SetNestedMap(obj.Object, spec, "spec"); err != nil {
		t.Fatal(err)
	}
	return obj
}

func newObject(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

func get(t *testing.T, gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	obj := newObject(gvk, namespace, name)
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// patch merge-patches obj with what change does to it.
func patch(t *testing.T, obj client.Object, change func()) {
	t.Helper()
	before := obj.DeepCopyObject().(client.Object)
	change()
	if err := env.Client.Patch(t.Context(), obj, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// touch sends an update event for each object, changing nothing the simulator reads.
func touch(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		stamp := fmt.Sprint(time.Now().UnixNano())
		p := fmt.Appendf(nil, `{"metadata":{"annotations":{"test.nodegroup.io/touched":%q}}}`, stamp)
		if err := env.Client.Patch(t.Context(), obj, client.RawPatch("application/merge-patch+json", p)); err != nil {
			t.Fatal(err)
		}
	}
}

func waitNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	return eventually(t, "Node "+name, func() (*corev1.Node, bool) {
		n := &corev1.Node{}
		err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, n)
		return n, err == nil && n.Status.NodeInfo.KubeletVersion != ""
	})
}

func noNode(t *testing.T, name string) {
	t.Helper()
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node %s: %v, want it not to exist", name, err)
	}
}

// eventually polls f until it reports done, failing the test after 30 seconds.
func eventually[T any](t *testing.T, what string, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, done := f()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reconcileMark is the number of reconciles each controller has finished so far.
func reconcileMark() map[string]float64 {
	out := map[string]float64{}
	families, _ := ctrlmetrics.Registry.Gather()
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// quiesce waits until each named controller has reconciled since mark and the simulator
// has then written nothing for half a second: what it does in response is done.
func quiesce(t *testing.T, mark map[string]float64, controllers ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("reconciles of %v", controllers), func() (any, bool) {
		now := reconcileMark()
		for _, c := range controllers {
			if now[c] <= mark[c] {
				return nil, false
			}
		}
		return nil, true
	})
	last, since := writes.Load(), time.Now()
	eventually(t, "the simulator to stop writing", func() (any, bool) {
		if n := writes.Load(); n != last {
			last, since = n, time.Now()
		}
		return nil, time.Since(since) > 500*time.Millisecond
	})
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %#v\n want %#v", what, got, want)
	}
}

func hasCondition(status map[string]any, typ string) bool {
	conditions, _, _ := unstructured.NestedSlice(status, "conditions")
	for _, c := range conditions {
		if c, _ := c.(map[string]any); c["type"] == typ && c["status"] == "True" {
			return true
		}
	}
	return false
}

// serverOf is the host and port of the test API server's kubeconfig.
func serverOf(t *testing.T) (string, int64) {
	t.Helper()
	host := strings.TrimPrefix(env.Config.Host, "https://")
	i := strings.LastIndex(host, ":")
	var port int64
	if _, err := fmt.Sscan(host[i+1:], &port); err != nil {
		t.Fatal(err)
	}
	return host[:i], port
}
