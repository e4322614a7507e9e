package render

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// machineDeployment renders the pool's MachineDeployment. spec.replicas is left out on
// purpose: Cluster API seeds it from the min-size annotation on create and clamps it into
// [min, max] afterwards, and cluster-autoscaler owns it from then on.
func machineDeployment(in *Input, meta metadata, bootstrap, infra clusterv1.ContractVersionedObjectReference) *clusterv1.MachineDeployment {
	machineLabels := make(map[string]string, len(meta.selector)+len(in.Spec.Roles)+4)
	for k, v := range meta.selector {
		machineLabels[k] = v
	}
	// The managed autoscaler discovers by the tenant label and checks it on the
	// MachineSet and Machine of a Node too (before it will scale a node group down), so
	// they carry it; Cluster API propagates template labels in place, without a rollout.
	machineLabels[names.LabelTenantCluster] = names.LabelValue(in.Cluster.Name)
	machineLabels[names.NodeLabelPool] = names.LabelValue(in.Name)
	machineLabels[names.NodeLabelLocation] = names.LabelValue(in.LocationName)
	for _, role := range in.Spec.Roles {
		machineLabels[names.NodeRolePrefix+role] = ""
	}
	labels := meta.labels
	if in.Spec.Autoscaled() {
		labels = maps.Clone(meta.labels)
		labels[names.LabelAutoscaled] = names.AutoscaledValue
		machineLabels[names.LabelAutoscaled] = names.AutoscaledValue
	}

	md := &clusterv1.MachineDeployment{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterAPIVersion, Kind: "MachineDeployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        meta.name,
			Namespace:   in.Namespace,
			Labels:      labels,
			Annotations: autoscalerAnnotations(in, machineLabels),
		},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: meta.cluster,
			Selector:    metav1.LabelSelector{MatchLabels: meta.selector},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type:          clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: rollingUpdate(in),
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: machineLabels},
				Spec: clusterv1.MachineSpec{
					ClusterName:       meta.cluster,
					Version:           in.KubernetesVersion,
					Bootstrap:         clusterv1.Bootstrap{ConfigRef: bootstrap},
					InfrastructureRef: infra,
				},
			},
		},
	}
	return md
}

// poolSelector selects the pool's MachineSets and Machines. Cluster API's cluster label
// is the name of the Cluster they run under (cluster), which its webhooks set and keep.
func poolSelector(in *Input, cluster string) map[string]string {
	return map[string]string{
		names.LabelClusterName: cluster,
		names.LabelPool:        names.LabelValue(in.Name),
	}
}

// objectLabels are the labels of every object the operator creates for a pool: Cluster
// API's cluster label (the Cluster the machines run under), the tenant's Cluster (the
// same but for a pool on a satellite; the managed autoscaler discovers a tenant's
// MachineDeployments by it), the pool and the operator's.
func objectLabels(in *Input, cluster string) map[string]string {
	return map[string]string{
		names.LabelClusterName:   cluster,
		names.LabelTenantCluster: names.LabelValue(in.Cluster.Name),
		names.LabelPool:          names.LabelValue(in.Name),
		names.LabelManagedBy:     names.ManagedByValue,
	}
}

// rollingUpdate defaults to one machine at a time, surging first, so a pool never has
// fewer ready machines than asked during a rollout.
func rollingUpdate(in *Input) clusterv1.MachineDeploymentRolloutStrategyRollingUpdate {
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	if r := in.Spec.Rollout; r != nil {
		if r.MaxSurge != nil {
			surge = *r.MaxSurge
		}
		if r.MaxUnavailable != nil {
			unavailable = *r.MaxUnavailable
		}
	}
	return clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: &surge, MaxUnavailable: &unavailable}
}

// nodeLabel is one label of a node. Render only ever lists node labels, sorted by key
// (in the kubelet flag and in the autoscaler's annotation), so it keeps them in sorted
// slices, which callers start on a stack array, rather than in maps built to be sorted.
type nodeLabel struct{ key, value string }

// nodeLabels appends the labels a node of the pool carries to dst, sorted by key: those
// Cluster API syncs from the Machine plus those the kubelet registers.
func nodeLabels(dst []nodeLabel, in *Input, machineLabels map[string]string) []nodeLabel {
	for k, v := range machineLabels {
		if strings.HasPrefix(k, names.NodeRolePrefix) || k == names.NodeLabelPool || k == names.NodeLabelLocation {
			dst = append(dst, nodeLabel{k, v})
		}
	}
	var buf [8]nodeLabel
	for _, l := range kubeletNodeLabels(buf[:0], in) {
		dst = setNodeLabel(dst, l.key, l.value)
	}
	slices.SortFunc(dst, compareNodeLabels)
	return dst
}

// kubeletNodeLabels appends the labels the kubelet registers itself, from the bootstrap
// config (the tenant's labels and the location's topology), to dst, sorted by key. The
// topology labels win over a tenant label of the same key.
func kubeletNodeLabels(dst []nodeLabel, in *Input) []nodeLabel {
	for k, v := range in.Spec.Labels {
		dst = append(dst, nodeLabel{k, string(v)})
	}
	if in.Location.Region != "" {
		dst = setNodeLabel(dst, names.NodeLabelRegion, in.Location.Region)
	}
	if in.Location.Zone != "" {
		dst = setNodeLabel(dst, names.NodeLabelZone, in.Location.Zone)
	}
	if len(in.Spec.GPUs) > 0 {
		dst = setNodeLabel(dst, names.NodeLabelAccelerator, acceleratorValue(in.Spec.GPUs[0].DeviceName))
	}
	slices.SortFunc(dst, compareNodeLabels)
	return dst
}

// acceleratorValue is the names.NodeLabelAccelerator value of a host device: its name after
// the vendor domain (GA102GL_A10 for nvidia.com/GA102GL_A10), which the API's pattern
// keeps a valid label value once shortened to 63 characters. Set the autoscaler's
// --gpu-total limits by this value.
func acceleratorValue(deviceName string) string {
	_, name, _ := strings.Cut(deviceName, "/")
	return names.LabelValue(name)
}

// setNodeLabel sets a label, replacing the value of one with the same key.
func setNodeLabel(labels []nodeLabel, key, value string) []nodeLabel {
	for i := range labels {
		if labels[i].key == key {
			labels[i].value = value
			return labels
		}
	}
	return append(labels, nodeLabel{key, value})
}

func compareNodeLabels(a, b nodeLabel) int { return strings.Compare(a.key, b.key) }

// joinLabels writes sorted labels as the kubelet's --node-labels flag and the autoscaler
// read them: key=value pairs, comma separated.
func joinLabels(labels []nodeLabel) string {
	n := len(labels)
	for _, l := range labels {
		n += len(l.key) + len(l.value)
	}
	var b strings.Builder
	b.Grow(n)
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.key)
		b.WriteByte('=')
		b.WriteString(l.value)
	}
	return b.String()
}

// autoscalerAnnotations carry the pool's range and, for scale from zero, what a node of
// the pool would look like: cluster-autoscaler cannot look at a node that does not exist.
func autoscalerAnnotations(in *Input, machineLabels map[string]string) map[string]string {
	cpu, memory := Allocatable(in.Machine)
	a := map[string]string{
		names.AnnotationMinSize:         strconv.Itoa(int(in.Spec.MinReplicas)),
		names.AnnotationMaxSize:         strconv.Itoa(int(in.Spec.MaxReplicas)),
		names.AnnotationCapacityCPU:     MilliCPUString(cpu),
		names.AnnotationCapacityMemory:  MemoryString(memory),
		names.AnnotationCapacityDisk:    in.Spec.EphemeralStorage.String(),
		names.AnnotationCapacityMaxPods: strconv.Itoa(int(Reserve(in.Machine).MaxPods)),
	}
	var buf [8]nodeLabel
	if labels := nodeLabels(buf[:0], in, machineLabels); len(labels) > 0 {
		a[names.AnnotationCapacityLabels] = joinLabels(labels)
	}
	if taints := joinTaints(in); taints != "" {
		a[names.AnnotationCapacityTaints] = taints
	}
	if len(in.Spec.GPUs) > 0 {
		// The autoscaler gives its template node gpu-count of the gpu-type resource, so
		// the type is what pods request inside the tenant (the device plugin's resource),
		// not the host device KubeVirt passes through.
		resource := in.Spec.GPUs[0].TenantResourceName()
		var count int32
		for _, g := range in.Spec.GPUs {
			if g.TenantResourceName() == resource {
				count += gpuCount(g.Count)
			}
		}
		a[names.AnnotationCapacityGPUType] = resource
		a[names.AnnotationCapacityGPUCount] = strconv.Itoa(int(count))
	}
	if o := in.Spec.Autoscaling; o != nil {
		for key, d := range map[string]*metav1.Duration{
			names.AnnotationOptionScaleDownUnneededTime: o.ScaleDownUnneededTime,
			names.AnnotationOptionScaleDownUnreadyTime:  o.ScaleDownUnreadyTime,
			names.AnnotationOptionMaxNodeProvisionTime:  o.MaxNodeProvisionTime,
			names.AnnotationOptionMaxNodeStartupTime:    o.MaxNodeStartupTime,
		} {
			if d != nil {
				a[key] = d.Duration.String()
			}
		}
		if o.ScaleDownUtilizationThreshold != "" {
			a[names.AnnotationOptionScaleDownUtilization] = o.ScaleDownUtilizationThreshold
		}
		if o.ScaleDownGPUUtilizationThreshold != "" {
			a[names.AnnotationOptionScaleDownGPUUtilization] = o.ScaleDownGPUUtilizationThreshold
		}
	}
	return a
}

func gpuCount(c int32) int32 { return max(c, 1) }

// joinTaints writes taints as the autoscaler reads them: key=value:Effect, comma separated.
func joinTaints(in *Input) string {
	var b strings.Builder
	for i, t := range in.Spec.Taints {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.Key)
		b.WriteByte('=')
		b.WriteString(t.Value)
		b.WriteByte(':')
		b.WriteString(string(t.Effect))
	}
	return b.String()
}
