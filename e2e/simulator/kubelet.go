// The simulated kubelet: its flags and configuration, and the Node it registers from
// them (labels, taints, capacity and allocatable), by the kubelet's own rules.

package simulator

import (
	"cmp"
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
			// The conditions a kubelet reports with its first status: Cluster API's
			// NodeHealthy waits for the three pressure conditions as well as Ready.
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available", now),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available", now),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "simulated kubelet is posting ready status", now),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: k.nodeName}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: k.version, OSImage: k.osImage, OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "containerd://simulated",
			},
		},
	}, nil
}

// condition is a Node condition first seen now.
func condition(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string, now metav1.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
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
