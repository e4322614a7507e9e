package names

// Labels and annotations the operator writes.
const (
	// LabelPool marks every object of a pool with the pool's name (as a label value).
	LabelPool = "nodegroup.io/pool"
	// LabelManagedBy marks what the operator created; it never deletes anything without it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "nodegroup-operator"
	// LabelAutoscaled marks the MachineDeployment of an autoscaled pool (minReplicas
	// below maxReplicas) and, through its machine template, the pool's MachineSets and
	// Machines (Cluster API propagates template labels in place, without a rollout):
	// the cluster's autoscaler discovers node groups by it (and checks a Machine's
	// MachineSet and MachineDeployment against it before it removes the Machine). A
	// fixed pool does not carry it, so no autoscaler ever looks at it.
	LabelAutoscaled = "nodegroup.io/autoscaled"
	// AutoscaledValue is the value of LabelAutoscaled.
	AutoscaledValue = "true"
	// LabelClusterName is Cluster API's cluster label.
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
	// LabelTenantCluster and LabelLocation mark what the operator makes for a tenant
	// cluster on one location (a satellite's InfraCluster): the tenant's Cluster and the
	// Location, as label values.
	LabelTenantCluster = "nodegroup.io/tenant-cluster"
	LabelLocation      = "nodegroup.io/location"

	// NodeLabelPool and NodeLabelLocation reach the Node: Cluster API syncs labels in the
	// node.cluster.x-k8s.io domain from Machine to Node.
	NodeLabelPool     = "node.cluster.x-k8s.io/nodegroup"
	NodeLabelLocation = "node.cluster.x-k8s.io/location"
	// NodeRolePrefix labels are synced from Machine to Node by Cluster API too (the
	// kubelet may not set them itself).
	NodeRolePrefix = "node-role.kubernetes.io/"
	// Topology labels are set by the kubelet from the bootstrap config; Cluster API does
	// not sync them.
	NodeLabelRegion = "topology.kubernetes.io/region"
	NodeLabelZone   = "topology.kubernetes.io/zone"
	// NodeLabelAccelerator marks a GPU node for cluster-autoscaler's clusterapi provider
	// (its GPULabel): a node with it counts as a GPU node before its device plugin has
	// advertised the GPUs, and scale-down weighs its GPU utilization. The kubelet sets it
	// (it is in no reserved domain); its value names the host device.
	NodeLabelAccelerator = "cluster-api/accelerator"

	// AnnotationTemplateHashVersion records the HashVersion a template was named with.
	AnnotationTemplateHashVersion = "nodegroup.io/template-hash-version"

	// Autoscaler annotations (cluster-autoscaler, clusterapi provider).
	AnnotationMinSize          = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	AnnotationMaxSize          = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
	capacityPrefix             = "capacity.cluster-autoscaler.kubernetes.io/"
	AnnotationCapacityCPU      = capacityPrefix + "cpu"
	AnnotationCapacityMemory   = capacityPrefix + "memory"
	AnnotationCapacityDisk     = capacityPrefix + "ephemeral-disk"
	AnnotationCapacityMaxPods  = capacityPrefix + "maxPods"
	AnnotationCapacityLabels   = capacityPrefix + "labels"
	AnnotationCapacityTaints   = capacityPrefix + "taints"
	AnnotationCapacityGPUType  = capacityPrefix + "gpu-type"
	AnnotationCapacityGPUCount = capacityPrefix + "gpu-count"

	// Per-pool autoscaler options the clusterapi provider reads from the
	// MachineDeployment, overriding the autoscaler's flags of the same name.
	optionsPrefix                           = "cluster.x-k8s.io/autoscaling-options-"
	AnnotationOptionScaleDownUnneededTime   = optionsPrefix + "scaledownunneededtime"
	AnnotationOptionScaleDownUnreadyTime    = optionsPrefix + "scaledownunreadytime"
	AnnotationOptionScaleDownUtilization    = optionsPrefix + "scaledownutilizationthreshold"
	AnnotationOptionScaleDownGPUUtilization = optionsPrefix + "scaledowngpuutilizationthreshold"
	AnnotationOptionMaxNodeProvisionTime    = optionsPrefix + "maxnodeprovisiontime"
	AnnotationOptionMaxNodeStartupTime      = optionsPrefix + "maxnodestartuptime"
)
