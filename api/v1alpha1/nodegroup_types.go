package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodeGroupSpec is the pool a tenant asks for.
//
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="spec.minReplicas must not exceed spec.maxReplicas"
// +kubebuilder:validation:XValidation:rule="has(self.resources) != has(self.instanceType)",message="set exactly one of spec.resources and spec.instanceType"
// +kubebuilder:validation:XValidation:rule="self.nodeGroupClassName != 'kairos' || (!has(self.osImage) && !has(self.kernelModules) && !has(self.gpus) && !has(self.talos))",message="spec.osImage, spec.kernelModules, spec.gpus and spec.talos are Talos-only and the pool's class is a Kairos class: remove them, or set spec.nodeGroupClassName to a Talos class"
type NodeGroupSpec struct {
	// clusterName is the Cluster API Cluster in this namespace that the pool joins.
	// Immutable: a pool never moves between clusters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterName is immutable: create a new pool for another cluster"
	ClusterName string `json:"clusterName"`

	// nodeGroupClassName is the NodeGroupClass: how workers are built and boot.
	// +optional
	// +kubebuilder:default=talos
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	NodeGroupClassName string `json:"nodeGroupClassName,omitempty"`

	// locationName is the Location: where the machines run.
	// +optional
	// +kubebuilder:default=in-cluster
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	LocationName string `json:"locationName,omitempty"`

	// minReplicas is the smallest size the autoscaler may scale the pool to; 0 lets it
	// scale from zero.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MinReplicas int32 `json:"minReplicas"`

	// maxReplicas is the largest size; equal to minReplicas makes a fixed-size pool.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas"`

	// resources sizes each machine by CPU and memory. Set this or instanceType.
	// +optional
	Resources *MachineResources `json:"resources,omitempty"`

	// instanceType sizes each machine from a KubeVirt VirtualMachineClusterInstancetype.
	// Set this or resources.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	InstanceType string `json:"instanceType,omitempty"`

	// ephemeralStorage is the size of each machine's system disk.
	// +optional
	// +kubebuilder:default="20Gi"
	EphemeralStorage resource.Quantity `json:"ephemeralStorage,omitempty"`

	// roles become node-role.kubernetes.io/<role> labels on the nodes.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="a role must be a valid label name (letters, digits, '-', '_', '.'; at most 63; starting and ending with a letter or digit)"
	Roles []string `json:"roles,omitempty"`

	// labels are added to the nodes. Keys in the kubernetes.io, k8s.io and nodegroup.io
	// domains are reserved (use roles for node-role labels).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="spec.labels keys must be valid label keys: an optional DNS subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*[.])?(kubernetes[.]io|k8s[.]io|nodegroup[.]io)/'))",message="spec.labels keys in the kubernetes.io, k8s.io and nodegroup.io domains are reserved: use spec.roles for node roles, or another domain"
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// taints are registered by the kubelet when a node joins.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Taints []Taint `json:"taints,omitempty"`

	// kubernetesVersion is the release of the workers, vMAJOR.MINOR or vMAJOR.MINOR.PATCH.
	// Defaults to the cluster's; never ahead of the control plane.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^v[0-9]+[.][0-9]+([.][0-9]+)?$')",message="spec.kubernetesVersion must look like v1.35 or v1.35.4"
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// osImage replaces the Talos installer image of the class (Talos only).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)+(:[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="spec.osImage must be an image reference such as registry/repository:tag or registry/repository@sha256:<64 hex>"
	OSImage string `json:"osImage,omitempty"`

	// kernelModules are loaded at boot (Talos only).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9_-]+$`
	KernelModules []string `json:"kernelModules,omitempty"`

	// gpus are host devices passed through to each machine (Talos only).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	GPUs []GPU `json:"gpus,omitempty"`

	// talos tunes the Talos system of the pool (Talos only).
	// +optional
	Talos *NodeGroupTalos `json:"talos,omitempty"`

	// rollout bounds how a change replaces machines.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`

	// healthCheck says when a machine is unhealthy and replaced.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`

	// autoscaling tunes how cluster-autoscaler treats this pool, overriding the
	// platform's cluster-wide settings for it. It applies when minReplicas is below
	// maxReplicas.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`
}

// Autoscaling holds the options cluster-autoscaler's clusterapi provider reads per node
// group (the cluster.x-k8s.io/autoscaling-options-* annotations of the pool's
// MachineDeployment). Unset fields keep the platform's cluster-wide values.
type Autoscaling struct {
	// scaleDownUnneededTime is how long a node must be unneeded before it is removed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.autoscaling.scaleDownUnneededTime must be a duration between 0s and 24h, such as 10m"
	ScaleDownUnneededTime *metav1.Duration `json:"scaleDownUnneededTime,omitempty"`
	// scaleDownUnreadyTime is how long an unready node must be unneeded before it is
	// removed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.autoscaling.scaleDownUnreadyTime must be a duration between 0s and 24h, such as 20m"
	ScaleDownUnreadyTime *metav1.Duration `json:"scaleDownUnreadyTime,omitempty"`
	// scaleDownUtilizationThreshold: a node whose requested CPU and memory are below this
	// share of its allocatable may be removed, a decimal between 0 and 1 such as "0.5".
	// +optional
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0([.][0-9]{1,3})?|1([.]0{1,3})?)$')",message="spec.autoscaling.scaleDownUtilizationThreshold must be a decimal between 0 and 1 with at most 3 decimals, such as \"0.5\""
	ScaleDownUtilizationThreshold string `json:"scaleDownUtilizationThreshold,omitempty"`
	// scaleDownGPUUtilizationThreshold is the same for GPU nodes, on their GPUs.
	// +optional
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0([.][0-9]{1,3})?|1([.]0{1,3})?)$')",message="spec.autoscaling.scaleDownGPUUtilizationThreshold must be a decimal between 0 and 1 with at most 3 decimals, such as \"0.5\""
	ScaleDownGPUUtilizationThreshold string `json:"scaleDownGPUUtilizationThreshold,omitempty"`
	// maxNodeProvisionTime is how long a machine may take to become a registered node
	// before the scale-up is given up and retried elsewhere.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="spec.autoscaling.maxNodeProvisionTime must be a duration between 1m and 24h, such as 15m"
	MaxNodeProvisionTime *metav1.Duration `json:"maxNodeProvisionTime,omitempty"`
	// maxNodeStartupTime is how long a registered node may take to become ready.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="spec.autoscaling.maxNodeStartupTime must be a duration between 1m and 24h, such as 15m"
	MaxNodeStartupTime *metav1.Duration `json:"maxNodeStartupTime,omitempty"`
}

// Autoscaled says whether cluster-autoscaler sizes the pool: its range has room.
func (s *NodeGroupSpec) Autoscaled() bool { return s.MinReplicas < s.MaxReplicas }

// LabelValue is a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.',
// starting and ending with a letter or digit, or empty.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')",message="spec.labels values must be valid label values: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
type LabelValue string

// SysctlValue is the value of a kernel parameter: plain text, no shell or line breaks.
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:XValidation:rule="self.matches('^[-A-Za-z0-9_. ,:/]*$')",message="spec.talos.sysctls values must be plain values (letters, digits, space and -_.,:/)"
type SysctlValue string

// MachineResources sizes a machine.
type MachineResources struct {
	// cpu is the number of virtual CPUs, a whole number such as 2 or 4.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isInteger() && quantity(string(self)).asInteger() >= 1 && quantity(string(self)).asInteger() <= 256",message="spec.resources.cpu must be a whole number of virtual CPUs between 1 and 256"
	CPU resource.Quantity `json:"cpu"`
	// memory is the machine's memory, such as 4Gi.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Gi')) >= 0 && quantity(string(self)).compareTo(quantity('4Ti')) <= 0",message="spec.resources.memory must be between 1Gi and 4Ti"
	Memory resource.Quantity `json:"memory"`
}

// TaintEffect is the effect of a taint on pods that do not tolerate it.
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

// Taint is a node taint the kubelet registers.
type Taint struct {
	// key of the taint, a valid label key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')",message="spec.taints[].key must be a valid label key"
	Key string `json:"key"`
	// value of the taint, a valid label value.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')",message="spec.taints[].value must be a valid label value"
	Value string `json:"value,omitempty"`
	// effect: NoSchedule, PreferNoSchedule or NoExecute.
	// +required
	Effect TaintEffect `json:"effect"`
}

// GPU is a host device passed through to each machine.
type GPU struct {
	// deviceName is the host device KubeVirt passes through, the resource name its
	// permittedHostDevices give it, such as nvidia.com/GA102GL_A10.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	DeviceName string `json:"deviceName"`
	// count of such devices per machine.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	Count int32 `json:"count,omitempty"`
	// resourceName is the resource pods request for the device inside the tenant
	// cluster, as the tenant's device plugin advertises it: nvidia.com/gpu when unset.
	// cluster-autoscaler scales the pool from zero for pods that request it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	ResourceName string `json:"resourceName,omitempty"`
}

// DefaultGPUResourceName is the resource a GPU is requested by in the tenant cluster
// unless the pool names another: what NVIDIA's device plugin advertises.
const DefaultGPUResourceName = "nvidia.com/gpu"

// TenantResourceName is the resource pods request for the GPU in the tenant cluster.
func (g GPU) TenantResourceName() string {
	if g.ResourceName != "" {
		return g.ResourceName
	}
	return DefaultGPUResourceName
}

// NodeGroupTalos tunes the Talos system of a pool.
type NodeGroupTalos struct {
	// sysctls are kernel parameters set on each machine.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 128 && k.matches('^[a-z0-9_-]+([./][a-z0-9_-]+)*$'))",message="spec.talos.sysctls keys must be kernel parameter names: parts of a-z, 0-9, '_' or '-' joined by '.' or '/', no empty or dot-only parts"
	Sysctls map[string]SysctlValue `json:"sysctls,omitempty"`
}

// Rollout bounds how a change replaces machines.
type Rollout struct {
	// maxSurge is how many machines may exist above the desired count during a rollout:
	// a number, or a percentage of the desired count such as 25%.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? self.size() <= 4 && self.matches('^[0-9]{1,3}%$') : self >= 0",message="spec.rollout.maxSurge must be a whole number of machines or a percentage, such as 1 or 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
	// maxUnavailable is how many machines may be unavailable during a rollout: a
	// number, or a percentage of the desired count such as 25%.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? self.size() <= 4 && self.matches('^[0-9]{1,3}%$') : self >= 0",message="spec.rollout.maxUnavailable must be a whole number of machines or a percentage, such as 1 or 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// HealthCheck says when a machine is unhealthy and replaced.
type HealthCheck struct {
	// nodeStartupTimeout is how long a machine may take to become a node.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.healthCheck.nodeStartupTimeout must be a duration between 0s and 24h, such as 10m"
	NodeStartupTimeout *metav1.Duration `json:"nodeStartupTimeout,omitempty"`
	// unhealthyNotReadyTimeout is how long a node may be NotReady.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.healthCheck.unhealthyNotReadyTimeout must be a duration between 0s and 24h, such as 5m"
	UnhealthyNotReadyTimeout *metav1.Duration `json:"unhealthyNotReadyTimeout,omitempty"`
	// unhealthyUnknownTimeout is how long a node may be Unknown (kubelet silent).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.healthCheck.unhealthyUnknownTimeout must be a duration between 0s and 24h, such as 5m"
	UnhealthyUnknownTimeout *metav1.Duration `json:"unhealthyUnknownTimeout,omitempty"`
	// maxUnhealthy stops remediation when more machines than this are unhealthy at once
	// (a sign of a wider outage): a number, or a percentage of the pool such as 40%.
	// Defaults so a one- or two-machine pool still heals.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? self.size() <= 4 && self.matches('^[0-9]{1,3}%$') : self >= 0",message="spec.healthCheck.maxUnhealthy must be a whole number of machines or a percentage, such as 1 or 40%"
	MaxUnhealthy *intstr.IntOrString `json:"maxUnhealthy,omitempty"`
}

// NodeGroupStatus is what the operator observes about a pool.
type NodeGroupStatus struct {
	// observedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, ClassResolved, LocationResolved, ClusterFound, Rendered; from
	// the MachineDeployment, in Cluster API's v1beta2 style, Available, RollingOut,
	// ScalingUp, ScalingDown and UpToDate; on Talos pools TalosIdentityReady and
	// TenantClusterReachable; on autoscaled pools AutoscalerReady and AbleToScaleUp;
	// TemplatesIntact once someone else changed one of the pool's templates; Paused
	// while its Cluster or the pool is paused. Room for twice as many as a pool carries
	// today, so a condition a later version adds is not refused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// os is the operating system resolved from the class.
	// +optional
	OS OSFamily `json:"os,omitempty"`

	// kubernetesVersion is the full release the pool runs.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// machineDeploymentName is the Cluster API MachineDeployment of the pool.
	// +optional
	MachineDeploymentName string `json:"machineDeploymentName,omitempty"`

	// bootstrapTemplateName is the current bootstrap config template.
	// +optional
	BootstrapTemplateName string `json:"bootstrapTemplateName,omitempty"`

	// infrastructureTemplateName is the current machine template.
	// +optional
	InfrastructureTemplateName string `json:"infrastructureTemplateName,omitempty"`

	// replicas is the number of machines.
	// +optional
	Replicas int32 `json:"replicas"`

	// readyReplicas is the number of machines whose node is ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// desiredReplicas is the size cluster-autoscaler (or, for a fixed pool, Cluster API)
	// last set on the pool's MachineDeployment.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`

	// upToDateReplicas is the number of machines that run the current templates and
	// Kubernetes version.
	// +optional
	UpToDateReplicas int32 `json:"upToDateReplicas"`

	// availableReplicas is the number of machines that have been ready for the
	// MachineDeployment's minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`

	// ready is readyReplicas/desiredReplicas as text, such as "2/3": the READY column of
	// kubectl get nodegroup.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Ready string `json:"ready,omitempty"`

	// summary is the pool's state in one word, the STATUS column of kubectl get
	// nodegroup: Ready; RollingOut (machines are replaced by ones of the current
	// templates); Scaling (machines are added or removed); NotReady (the pool has the
	// machines it wants, but not all are ready); Pending (not evaluated yet); or
	// Failed: <reason>, the reason of the first condition Ready is derived from that is
	// False (such as Failed: ClassNotFound).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Summary string `json:"summary,omitempty"`

	// notRunningMachines are the pool's machines that are not running, or whose Ready
	// condition is not True, sorted by name; at most 10 (notRunningMachineCount counts
	// them all).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	NotRunningMachines []MachineNotRunning `json:"notRunningMachines,omitempty"`

	// notRunningMachineCount is the number of machines that are not running, listed in
	// notRunningMachines or not.
	// +optional
	NotRunningMachineCount int32 `json:"notRunningMachineCount,omitempty"`
}

// MaxNotRunningMachines is how many machines status.notRunningMachines lists.
const MaxNotRunningMachines = 10

// MachineNotRunning is a machine of the pool that is not running, and why.
type MachineNotRunning struct {
	// name of the Cluster API Machine.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// phase of the Machine: Pending, Provisioning, Provisioned, Running, Deleting,
	// Failed, ...
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Phase string `json:"phase,omitempty"`
	// condition is the type of the Machine's condition that says why: the first of
	// Deleting (while it is deleted), BootstrapConfigReady, InfrastructureReady,
	// NodeHealthy, HealthCheckSucceeded and Ready that is not as it should be.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Condition string `json:"condition,omitempty"`
	// reason of that condition.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
	// message of that condition, on one line, cut at 256 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// clusterctl move carries pools with their Cluster through the two labels of the
// NodeGroup CRD below: clusterctl discovers the kinds of CRDs labelled
// clusterctl.cluster.x-k8s.io, and moves a pool with everything it owns (its
// MachineDeployment, health check, templates and pull secret copies) for
// move-hierarchy. NodeGroupClasses and Locations are the platform's: the target
// management cluster must have them already.

// NodeGroup is a tenant's worker pool: machines of one class, in one location, joined to
// one Cluster in the same namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="helm.sh/resource-policy=keep"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/move-hierarchy="
// +kubebuilder:resource:shortName=ng;ngs,categories=nodegroup-all
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.nodeGroupClassName`
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.spec.locationName`
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minReplicas`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.summary`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.upToDateReplicas`,priority=1
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`,priority=1
// +kubebuilder:printcolumn:name="MachineDeployment",type=string,JSONPath=`.status.machineDeploymentName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeGroupSpec `json:"spec"`

	// +optional
	Status NodeGroupStatus `json:"status,omitempty"`
}

// NodeGroupList is a list of NodeGroup.
//
// +kubebuilder:object:root=true
type NodeGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeGroup `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &NodeGroup{}, &NodeGroupList{})
}
