package render

import (
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// machineDeployment renders the pool's MachineDeployment. spec.replicas is left out on
// purpose: Cluster API seeds it from the min-size annotation on create and clamps it into
// [min, max] afterwards, and cluster-autoscaler owns it from then on.
func machineDeployment(in *Input, bootstrap, infra clusterv1.ContractVersionedObjectReference) *clusterv1.MachineDeployment {
	name := MachineDeploymentName(in.Cluster.Name, in.Name)
	selector := poolSelector(in)

	machineLabels := make(map[string]string, len(selector)+len(in.Spec.Roles)+2)
	for k, v := range selector {
		machineLabels[k] = v
	}
	machineLabels[NodeLabelPool] = LabelValue(in.Name)
	machineLabels[NodeLabelLocation] = LabelValue(in.LocationName)
	for _, role := range in.Spec.Roles {
		machineLabels[NodeRolePrefix+role] = ""
	}

	md := &clusterv1.MachineDeployment{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   in.Namespace,
			Labels:      objectLabels(in),
			Annotations: autoscalerAnnotations(in, machineLabels),
		},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: in.Cluster.Name,
			Selector:    metav1.LabelSelector{MatchLabels: selector},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type:          clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: rollingUpdate(in),
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: machineLabels},
				Spec: clusterv1.MachineSpec{
					ClusterName:       in.Cluster.Name,
					Version:           in.KubernetesVersion,
					Bootstrap:         clusterv1.Bootstrap{ConfigRef: bootstrap},
					InfrastructureRef: infra,
				},
			},
		},
	}
	return md
}

// poolSelector selects the pool's MachineSets and Machines.
func poolSelector(in *Input) map[string]string {
	return map[string]string{
		LabelClusterName: in.Cluster.Name,
		LabelPool:        LabelValue(in.Name),
	}
}

// objectLabels are the labels of every object the operator creates for a pool.
func objectLabels(in *Input) map[string]string {
	return map[string]string{
		LabelClusterName: in.Cluster.Name,
		LabelPool:        LabelValue(in.Name),
		LabelManagedBy:   ManagedByValue,
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

// NodeLabels are the labels a node of the pool carries: those Cluster API syncs from the
// Machine plus those the kubelet registers (topology and the tenant's own).
func NodeLabels(in *Input, machineLabels map[string]string) map[string]string {
	out := make(map[string]string, len(machineLabels)+len(in.Spec.Labels)+2)
	for k, v := range machineLabels {
		if strings.HasPrefix(k, NodeRolePrefix) || k == NodeLabelPool || k == NodeLabelLocation {
			out[k] = v
		}
	}
	for k, v := range KubeletNodeLabels(in) {
		out[k] = v
	}
	return out
}

// KubeletNodeLabels are the labels the kubelet registers itself, from the bootstrap
// config: the tenant's labels and the location's topology.
func KubeletNodeLabels(in *Input) map[string]string {
	out := make(map[string]string, len(in.Spec.Labels)+2)
	for k, v := range in.Spec.Labels {
		out[k] = string(v)
	}
	if in.Location.Region != "" {
		out[NodeLabelRegion] = in.Location.Region
	}
	if in.Location.Zone != "" {
		out[NodeLabelZone] = in.Location.Zone
	}
	return out
}

// autoscalerAnnotations carry the pool's range and, for scale from zero, what a node of
// the pool would look like: cluster-autoscaler cannot look at a node that does not exist.
func autoscalerAnnotations(in *Input, machineLabels map[string]string) map[string]string {
	cpu, memory := Allocatable(in.Machine)
	a := map[string]string{
		AnnotationMinSize:         strconv.Itoa(int(in.Spec.MinReplicas)),
		AnnotationMaxSize:         strconv.Itoa(int(in.Spec.MaxReplicas)),
		AnnotationCapacityCPU:     MilliCPUString(cpu),
		AnnotationCapacityMemory:  MemoryString(memory),
		AnnotationCapacityDisk:    in.Spec.EphemeralStorage.String(),
		AnnotationCapacityMaxPods: strconv.Itoa(int(Reserve(in.Machine).MaxPods)),
	}
	if labels := joinLabels(NodeLabels(in, machineLabels)); labels != "" {
		a[AnnotationCapacityLabels] = labels
	}
	if taints := joinTaints(in); taints != "" {
		a[AnnotationCapacityTaints] = taints
	}
	if len(in.Spec.GPUs) > 0 {
		var count int32
		for _, g := range in.Spec.GPUs {
			count += gpuCount(g.Count)
		}
		a[AnnotationCapacityGPUType] = in.Spec.GPUs[0].DeviceName
		a[AnnotationCapacityGPUCount] = strconv.Itoa(int(count))
	}
	return a
}

func gpuCount(c int32) int32 { return max(c, 1) }

// joinLabels writes labels as the autoscaler reads them: key=value pairs, comma
// separated, sorted so the annotation is stable.
func joinLabels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
	}
	return b.String()
}

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
