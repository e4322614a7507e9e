package simulator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"
)

// addNodes plays the worker's kubelet: for each Machine whose infrastructure machine is
// ready, it joins the tenant with what the bootstrap data gives it and registers a Node.
func (s *sim) addNodes(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simulator-node").
		For(&clusterv1.Machine{}).
		Watches(newObject(KubevirtMachineGVK), handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &clusterv1.Machine{})).
		// A join waits a moment for its certificate; other Machines need not wait behind it.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(reconcile.Func(s.reconcileNode))
}

func (s *sim) reconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &clusterv1.Machine{}
	if err := s.Get(ctx, req.NamespacedName, m); err != nil || !m.DeletionTimestamp.IsZero() || m.Spec.Bootstrap.DataSecretName == nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // a Machine being deleted never gets a Node
	}
	if refRequest(m.Namespace, m.Spec.InfrastructureRef, KubevirtMachineGVK) == nil {
		return reconcile.Result{}, nil
	}
	vm, err := s.get(ctx, KubevirtMachineGVK, m.Namespace, m.Spec.InfrastructureRef.Name)
	if vm == nil || err != nil || !vm.GetDeletionTimestamp().IsZero() || vm.GetAnnotations()[AnnotationSimulatedNode] != "" {
		return reconcile.Result{}, err // the VM is gone, or has booted once already
	}
	ready, _, _ := unstructured.NestedBool(vm.Object, "status", "ready")
	providerID, _, _ := unstructured.NestedString(vm.Object, "spec", "providerID")
	if !ready || providerID == "" {
		return reconcile.Result{}, nil
	}
	// The cache may not hold yet the annotation written when the Node was made: ask the
	// API server before making it a second time.
	fresh := newObject(KubevirtMachineGVK)
	if err := s.live.Get(ctx, client.ObjectKeyFromObject(vm), fresh); err != nil || fresh.GetAnnotations()[AnnotationSimulatedNode] != "" {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	secret := &corev1.Secret{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}, secret); err != nil {
		return reconcile.Result{RequeueAfter: cacheLag}, client.IgnoreNotFound(err)
	}

	k, err := readBootstrap(m, vm.GetName(), secret.Data[dataKey])
	var node *corev1.Node
	if err == nil {
		node, err = k.node(vmCapacity(vm))
	}
	if err != nil {
		s.refuse(ctx, m, "KubeletRefused", err)
		return reconcile.Result{}, nil
	}
	st, err := s.joinState(fresh.GetUID())
	if err != nil {
		return reconcile.Result{}, err
	}
	credentials, err := s.tlsBootstrap(ctx, st, k)
	if err != nil {
		return s.joinFailed(ctx, m, st, err), nil
	}
	if credentials == nil {
		return reconcile.Result{RequeueAfter: certificatePoll}, nil
	}
	err = register(ctx, credentials, node, osChanges{labels: k.osLabels, annotations: k.annotations, taints: k.osTaints})
	switch {
	case errors.Is(err, errOSRefused):
		// The Node is registered without what the OS asked for; the OS would keep trying
		// and failing, the simulator reports it once.
		s.refuse(ctx, m, "NodeRefused", err)
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		s.refuse(ctx, m, "NodeRefused", err)
		s.joined(fresh.GetUID())
		return reconcile.Result{}, nil
	case err != nil:
		return s.joinFailed(ctx, m, st, err), nil
	}
	s.joined(fresh.GetUID())
	return reconcile.Result{}, s.patch(ctx, vm, false, func() error {
		vm.SetAnnotations(mergeMaps(vm.GetAnnotations(), map[string]string{AnnotationSimulatedNode: node.Name}))
		return nil
	})
}

// joinFailed reports a failed join on the Machine, as a kubelet's log would show it, and
// retries it with backoff, as a kubelet does. A step that is only waiting (cluster-info
// not signed yet for a new token) is retried quietly for a while first.
func (s *sim) joinFailed(ctx context.Context, m *clusterv1.Machine, st *joinState, err error) reconcile.Result {
	var pending pendingError
	if errors.As(err, &pending) && time.Since(st.started) < discoveryGrace {
		return reconcile.Result{RequeueAfter: certificatePoll}
	}
	st.failures++
	log.FromContext(ctx).Info("simulated kubelet: the join failed", "machine", client.ObjectKeyFromObject(m), "error", err.Error())
	s.events.Eventf(m, nil, corev1.EventTypeWarning, "JoinFailed", "Join", "%v", err)
	return reconcile.Result{RequeueAfter: min(time.Second<<min(st.failures-1, 5), joinBackoffCap)}
}

// joinBackoffCap bounds the wait between a kubelet's attempts to join.
const joinBackoffCap = 30 * time.Second

// register creates the Node as the kubelet, with its own credentials (the Node
// authorizer and NodeRestriction apply) and its initial status, as a kubelet's
// registration does (the API server keeps the status of a Node it creates), then has
// the OS set its labels, taints and annotations on it, as Talos does with the kubelet's
// identity. A Node an earlier attempt created is taken as it is. An error wrapping
// errOSRefused is the tenant refusing the OS's step: the Node is registered without
// what it asked for.
func register(ctx context.Context, credentials *rest.Config, node *corev1.Node, fromOS osChanges) error {
	cs, err := kubernetes.NewForConfig(credentials)
	if err != nil {
		return err
	}
	nodes := cs.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = nodes.Get(ctx, node.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	patch, err := fromOS.patch(created)
	if err != nil || patch == nil {
		return err
	}
	if _, err := nodes.Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return fmt.Errorf("%w: %w", errOSRefused, err)
		}
		return err
	}
	return nil
}

// errOSRefused is the tenant API server refusing what the OS sets on its registered
// Node.
var errOSRefused = errors.New("the tenant refuses the node labels, taints or annotations of the machine config")

// osChanges are what the OS sets on the Node once the kubelet has registered it (Talos
// machine.nodeLabels, nodeTaints and nodeAnnotations).
type osChanges struct {
	labels, annotations map[string]string
	taints              []corev1.Taint
}

// patch is the merge patch that brings the Node to what the OS wants, nil when it has it.
func (o osChanges) patch(n *corev1.Node) ([]byte, error) {
	meta := map[string]any{}
	if missing := missingEntries(n.Labels, o.labels); missing != nil {
		meta["labels"] = missing
	}
	if missing := missingEntries(n.Annotations, o.annotations); missing != nil {
		meta["annotations"] = missing
	}
	patch := map[string]any{}
	if len(meta) > 0 {
		patch["metadata"] = meta
	}
	taints := slices.Clone(n.Spec.Taints)
	for _, t := range o.taints {
		if !slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
			taints = slices.DeleteFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
			taints = append(taints, t)
		}
	}
	if len(taints) != len(n.Spec.Taints) || !slices.Equal(taints, n.Spec.Taints) {
		patch["spec"] = map[string]any{"taints": taints}
	}
	if len(patch) == 0 {
		return nil, nil
	}
	return json.Marshal(patch)
}

// missingEntries are the entries of want that have has not, nil when none.
func missingEntries(has, want map[string]string) map[string]string {
	var out map[string]string
	for k, v := range want {
		if got, ok := has[k]; !ok || got != v {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// kubelet is what a worker's bootstrap data tells its OS and kubelet about the Node.
type kubelet struct {
	nodeName, version, osImage string
	// bootstrap (Talos) or discovery (kubeadm) is how the kubelet joins the tenant.
	bootstrap *joinCredentials
	discovery *tokenDiscovery
	// flags are the kubelet's command-line flags, every value as given.
	flags  map[string][]string
	config kubeletConfig
	// osLabels, osTaints and annotations are set by the OS through the API once the
	// Node exists (Talos machine.nodeLabels, nodeTaints, nodeAnnotations).
	osLabels, annotations map[string]string
	osTaints              []corev1.Taint
}

// kubeletConfig is the part of a KubeletConfiguration that shapes the Node.
type kubeletConfig struct {
	KubeReserved       map[string]string `json:"kubeReserved"`
	SystemReserved     map[string]string `json:"systemReserved"`
	EvictionHard       map[string]string `json:"evictionHard"`
	MaxPods            int64             `json:"maxPods"`
	RegisterWithTaints []corev1.Taint    `json:"registerWithTaints"`
}

// readBootstrap reads the bootstrap data as the Machine's OS would, by the kind of its
// bootstrap config. vmName is the VM's hostname.
func readBootstrap(m *clusterv1.Machine, vmName string, data []byte) (*kubelet, error) {
	var k *kubelet
	var err error
	switch ref := m.Spec.Bootstrap.ConfigRef; {
	case ref.APIGroup == TalosConfigGVK.Group && ref.Kind == TalosConfigGVK.Kind:
		k, err = readTalos(data, vmName)
	case ref.APIGroup == KairosConfigGVK.Group && ref.Kind == KairosConfigGVK.Kind:
		k, err = readKairos(data, vmName)
	default:
		return nil, fmt.Errorf("bootstrap config kind %s is not simulated", ref.GroupKind())
	}
	if err != nil {
		return nil, err
	}
	k.version = cmp.Or(k.version, m.Spec.Version)
	return k, nil
}

// talosMode is the runtime mode of a Talos VM under CAPK (the cloud images, no install).
type talosMode struct{}

func (talosMode) String() string        { return "cloud" }
func (talosMode) RequiresInstall() bool { return false }
func (talosMode) InContainer() bool     { return false }

// readTalos loads a Talos machine config as a Talos node does: unknown fields and
// validation errors mean the node never applies it.
func readTalos(data []byte, vmName string) (*kubelet, error) {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("Talos refuses the machine config: %w", err)
	}
	if _, err := cfg.Validate(talosMode{}); err != nil {
		return nil, fmt.Errorf("Talos refuses the machine config: %w", err)
	}
	mc := cfg.Machine()
	kl := mc.Kubelet()
	if kl.SkipNodeRegistration() {
		return nil, fmt.Errorf("the Talos kubelet is told not to register a Node")
	}
	bootstrap, err := talosJoin(cfg.Cluster())
	if err != nil {
		return nil, err
	}
	k := &kubelet{
		nodeName: cmp.Or(mc.Network().Hostname(), vmName), osImage: "Talos (simulated)", bootstrap: bootstrap,
		flags: map[string][]string{}, osLabels: mc.NodeLabels(), annotations: mc.NodeAnnotations(),
	}
	for name, v := range kl.ExtraArgs() {
		k.flags[name] = []string{v}
	}
	// The kubelet's version is the tag of the image Talos runs it from.
	if image := kl.Image(); !strings.Contains(image, "@") {
		if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
			k.version = image[i+1:]
		}
	}
	if err := remarshal(kl.ExtraConfig(), &k.config); err != nil {
		return nil, fmt.Errorf("Talos kubelet extraConfig: %w", err)
	}
	for _, key := range slices.Sorted(maps.Keys(mc.NodeTaints())) {
		value, effect, found := strings.Cut(mc.NodeTaints()[key], ":")
		if !found {
			value, effect = "", value
		}
		k.osTaints = append(k.osTaints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	return k, nil
}

// talosJoin is what a Talos worker's kubelet joins with: the bootstrap token and the
// Kubernetes CA of cluster.token and cluster.ca (with cluster.acceptedCAs), and the API
// server of cluster.controlPlane.endpoint.
func talosJoin(c talosconfig.ClusterConfig) (*joinCredentials, error) {
	token := c.Token()
	switch {
	case token == nil || token.ID() == "" || token.Secret() == "":
		return nil, errors.New("Talos: the machine config has no cluster.token")
	case c.Endpoint() == nil:
		return nil, errors.New("Talos: the machine config has no cluster.controlPlane.endpoint")
	case c.IssuingCA() == nil || len(c.IssuingCA().Crt) == 0:
		return nil, errors.New("Talos: the machine config has no cluster.ca.crt")
	}
	ca := slices.Clone(c.IssuingCA().Crt)
	for _, accepted := range c.AcceptedCAs() {
		ca = append(ca, accepted.Crt...)
	}
	return &joinCredentials{server: c.Endpoint().String(), caPEM: ca, token: token.ID() + "." + token.Secret()}, nil
}

// kairosCloudConfig is the part of the cloud-config a kubeadm worker reads.
type kairosCloudConfig struct {
	Hostname   string      `json:"hostname"`
	WriteFiles []cloudFile `json:"write_files"`
	Cluster    struct {
		Config string `json:"config"`
	} `json:"cluster"`
}

type cloudFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// kubeadmConfig is the part of the kubeadm configuration that joins and shapes the Node.
type kubeadmConfig struct {
	JoinConfiguration struct {
		Discovery struct {
			BootstrapToken *struct {
				Token             string   `json:"token"`
				APIServerEndpoint string   `json:"apiServerEndpoint"`
				CACertHashes      []string `json:"caCertHashes"`
			} `json:"bootstrapToken"`
		} `json:"discovery"`
		NodeRegistration struct {
			Name             string `json:"name"`
			KubeletExtraArgs []struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"kubeletExtraArgs"`
			Taints []corev1.Taint `json:"taints"`
		} `json:"nodeRegistration"`
		Patches *struct {
			Directory string `json:"directory"`
		} `json:"patches"`
	} `json:"joinConfiguration"`
}

// readKairos reads a kubeadm worker's cloud-config as kubeadm join sets up the kubelet:
// nodeRegistration.taints become --register-with-taints, kubeletExtraArgs are flags
// (replacing kubeadm's own of the same name), and kubeletconfiguration patches in the
// patches directory are merged into the kubelet configuration in file name order.
func readKairos(data []byte, vmName string) (*kubelet, error) {
	var cc kairosCloudConfig
	if err := yaml.Unmarshal(data, &cc); err != nil {
		return nil, fmt.Errorf("Kairos cloud-config: %w", err)
	}
	var kc kubeadmConfig
	if err := yaml.Unmarshal([]byte(cc.Cluster.Config), &kc); err != nil {
		return nil, fmt.Errorf("kubeadm configuration: %w", err)
	}
	reg := kc.JoinConfiguration.NodeRegistration
	k := &kubelet{nodeName: cmp.Or(reg.Name, cc.Hostname, vmName), osImage: "Kairos (simulated)", flags: map[string][]string{}}
	if bt := kc.JoinConfiguration.Discovery.BootstrapToken; bt != nil {
		k.discovery = &tokenDiscovery{token: bt.Token, apiServerEndpoint: bt.APIServerEndpoint, caCertHashes: bt.CACertHashes}
	}
	if len(reg.Taints) > 0 {
		k.flags["register-with-taints"] = []string{formatTaints(reg.Taints)}
	}
	extra := map[string][]string{}
	for _, a := range reg.KubeletExtraArgs {
		extra[a.Name] = append(extra[a.Name], a.Value)
	}
	maps.Copy(k.flags, extra)
	if p := kc.JoinConfiguration.Patches; p != nil {
		files := slices.Clone(cc.WriteFiles)
		slices.SortFunc(files, func(a, b cloudFile) int { return strings.Compare(a.Path, b.Path) })
		for _, f := range files {
			if path.Dir(f.Path) == path.Clean(p.Directory) && strings.HasPrefix(path.Base(f.Path), "kubeletconfiguration") {
				// Maps merge key by key, lists are replaced: a strategic merge of these fields.
				if err := yaml.Unmarshal([]byte(f.Content), &k.config); err != nil {
					return nil, fmt.Errorf("kubelet patch %s: %w", f.Path, err)
				}
			}
		}
	}
	return k, nil
}

// userAgent is the kubelet's, as the tenant's audit log and managed fields name it.
func (k *kubelet) userAgent() string {
	return "kubelet/" + k.version + " (linux/amd64) simulated"
}

// node is the Node the kubelet registers, with its initial status. It has no
// providerID: no cloud provider gives a KubeVirt VM's kubelet one, CAPK patches it.
func (k *kubelet) node(capacity corev1.ResourceList) (*corev1.Node, error) {
	labels := map[string]string{}
	for _, v := range k.flags["node-labels"] {
		for pair := range strings.SplitSeq(v, ",") {
			key, value, ok := strings.Cut(pair, "=")
			if pair == "" {
				continue
			}
			if !ok {
				return nil, fmt.Errorf("kubelet: --node-labels %q is not key=value", pair)
			}
			if !kubeletMayLabel(key) {
				return nil, fmt.Errorf("kubelet: unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [%s]", key)
			}
			labels[key] = value
		}
	}
	// The kubelet's own labels win over the flag; the OS's come later, through the API
	// (osChanges).
	maps.Copy(labels, map[string]string{
		corev1.LabelHostname: strings.ToLower(k.nodeName), corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
	})

	taints := k.config.RegisterWithTaints
	if v := k.flags["register-with-taints"]; len(v) > 0 {
		var err error
		if taints, err = parseTaints(v[len(v)-1]); err != nil {
			return nil, err
		}
	}
	// Malformed labels and taint effects are left for the API server to refuse.

	capacity[corev1.ResourcePods] = *resource.NewQuantity(cmp.Or(k.config.MaxPods, 110), resource.DecimalSI)
	allocatable, err := k.allocatable(capacity)
	if err != nil {
		return nil, err
	}

	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: k.nodeName, Labels: labels,
			Annotations: map[string]string{AnnotationKwok: "fake"},
		},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: allocatable,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "simulated kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: k.nodeName}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: k.version, OSImage: k.osImage, OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "containerd://simulated",
			},
		},
	}, nil
}

// allocatable is capacity less kubeReserved and systemReserved and, for memory, the hard
// eviction threshold, as the kubelet computes it.
func (k *kubelet) allocatable(capacity corev1.ResourceList) (corev1.ResourceList, error) {
	out := capacity.DeepCopy()
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := out[name]
		if !ok {
			continue
		}
		reserved := []string{k.config.KubeReserved[string(name)], k.config.SystemReserved[string(name)]}
		if name == corev1.ResourceMemory {
			reserved = append(reserved, k.config.EvictionHard["memory.available"])
		}
		for _, r := range reserved {
			if r == "" {
				continue
			}
			v, err := reservation(r, capacity[name])
			if err != nil {
				return nil, fmt.Errorf("kubelet: %s reservation %q: %w", name, r, err)
			}
			q.Sub(v)
		}
		if q.Sign() < 0 {
			q = resource.Quantity{}
		}
		out[name] = q
	}
	return out, nil
}

// reservation reads a reserved quantity, or a percentage of capacity.
func reservation(r string, capacity resource.Quantity) (resource.Quantity, error) {
	if pct, ok := strings.CutSuffix(r, "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil {
			return resource.Quantity{}, err
		}
		return *resource.NewQuantity(int64(float64(capacity.Value())*p/100), resource.BinarySI), nil
	}
	return resource.ParseQuantity(r)
}

// vmCapacity is the VM's vCPUs and memory as KubeVirt sizes it: empty for an
// instancetype, which the simulator does not resolve.
func vmCapacity(vm *unstructured.Unstructured) corev1.ResourceList {
	domain, _, _ := unstructured.NestedMap(vm.Object, "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain")
	out := corev1.ResourceList{}
	if cpu, ok := domain["cpu"].(map[string]any); ok {
		n := int64(1)
		for _, f := range []string{"cores", "sockets", "threads"} {
			if v, ok := cpu[f].(int64); ok && v > 0 {
				n *= v
			}
		}
		out[corev1.ResourceCPU] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	guest, _, _ := unstructured.NestedString(domain, "memory", "guest")
	requested, _, _ := unstructured.NestedString(domain, "resources", "requests", "memory")
	if q, err := resource.ParseQuantity(cmp.Or(guest, requested)); err == nil {
		out[corev1.ResourceMemory] = q
	}
	// NVIDIA's device plugin, which a GPU worker runs, advertises every NVIDIA device
	// passed through to the VM as nvidia.com/gpu, whatever its model.
	devices, _, _ := unstructured.NestedSlice(domain, "devices", "hostDevices")
	var gpus int64
	for _, d := range devices {
		if m, ok := d.(map[string]any); ok {
			if name, _ := m["deviceName"].(string); strings.HasPrefix(name, "nvidia.com/") {
				gpus++
			}
		}
	}
	if gpus > 0 {
		out[nvidiaGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return out
}

// nvidiaGPU is the resource NVIDIA's device plugin advertises.
const nvidiaGPU corev1.ResourceName = "nvidia.com/gpu"

// kubeletMayLabel is the kubelet's rule for --node-labels: nothing in the kubernetes.io
// or k8s.io domains but its own well-known labels and the kubelet.kubernetes.io and
// node.kubernetes.io namespaces (k8s.io/kubelet/pkg/apis.IsKubeletLabel).
func kubeletMayLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	in := func(domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }
	if !in("kubernetes.io") && !in("k8s.io") {
		return true
	}
	switch key {
	case corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
		corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
		corev1.LabelInstanceType, corev1.LabelInstanceTypeStable, corev1.LabelOSStable, corev1.LabelArchStable,
		"beta.kubernetes.io/os", "beta.kubernetes.io/arch":
		return true
	}
	return in("kubelet.kubernetes.io") || in("node.kubernetes.io")
}

// formatTaints writes taints as --register-with-taints takes them: key=value:Effect.
func formatTaints(taints []corev1.Taint) string {
	parts := make([]string, len(taints))
	for i, t := range taints {
		parts[i] = t.Key
		if t.Value != "" {
			parts[i] += "=" + t.Value
		}
		parts[i] += ":" + string(t.Effect)
	}
	return strings.Join(parts, ",")
}

// parseTaints reads --register-with-taints.
func parseTaints(flag string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for spec := range strings.SplitSeq(flag, ",") {
		i := strings.LastIndex(spec, ":")
		if i < 0 {
			return nil, fmt.Errorf("kubelet: --register-with-taints %q has no effect", spec)
		}
		key, value, _ := strings.Cut(spec[:i], "=")
		out = append(out, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(spec[i+1:])})
	}
	return out, nil
}

// remarshal converts between JSON-shaped values through JSON.
func remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}
