package v1alpha1

// OSFamily is the operating system a worker boots, which also decides how it joins the
// tenant control plane.
// +kubebuilder:validation:Enum=Talos;Kairos
type OSFamily string

const (
	// OSTalos workers boot Talos Linux and join with a Talos machine config.
	OSTalos OSFamily = "Talos"
	// OSKairos workers boot a Kairos disk and join with kubeadm.
	OSKairos OSFamily = "Kairos"
)

// Names of the built-in objects the chart ships. The operator resolves the built-in
// classes from code, so a pool on them never depends on the object existing.
const (
	// BuiltinTalosClass is the default class: Talos workers from the platform catalog.
	BuiltinTalosClass = "talos"
	// BuiltinKairosClass is the Kairos class with the platform-built worker disk.
	BuiltinKairosClass = "kairos"
	// BuiltinLocation is the KubeVirt location in the management cluster.
	BuiltinLocation = "in-cluster"
)

// Condition types shared by the kinds of this group.
const (
	// ConditionReady is True when every machine of the pool is ready.
	ConditionReady = "Ready"
	// ConditionClassResolved is True when the pool's class exists and applies to it.
	ConditionClassResolved = "ClassResolved"
	// ConditionLocationResolved is True when the pool's location exists and admits its namespace.
	ConditionLocationResolved = "LocationResolved"
	// ConditionClusterFound is True when the pool's Cluster exists in its namespace.
	ConditionClusterFound = "ClusterFound"
	// ConditionRendered is True when the desired objects are applied and current.
	ConditionRendered = "Rendered"
	// ConditionTalosIdentityReady is True on a Talos pool when its cluster's Talos join
	// identity (the Secret <cluster>-talos) exists, made by the operator or brought by
	// the platform; the reason says which.
	ConditionTalosIdentityReady = "TalosIdentityReady"
	// ConditionTenantClusterReachable is True on a Talos pool when the operator reaches
	// its tenant cluster's API server and keeps the pool's bootstrap token there.
	ConditionTenantClusterReachable = "TenantClusterReachable"
	// ConditionAutoscalerReady is True on an autoscaled pool (minReplicas below
	// maxReplicas) when its cluster's cluster-autoscaler runs: the one the operator keeps
	// for the cluster, or the platform's own when the cluster turned the managed one
	// off. False says why the pool does not scale.
	ConditionAutoscalerReady = "AutoscalerReady"
	// ConditionAbleToScaleUp is the autoscaler's own view of an autoscaled pool, read from
	// its status ConfigMap in the tenant cluster: True while it may add nodes, False when
	// it will not (the pool is at spec.maxReplicas, the autoscaler backs off after a
	// failed scale-up, or it finds the pool unhealthy), with its reason; Unknown while the
	// autoscaler has not reported on the pool.
	ConditionAbleToScaleUp = "AbleToScaleUp"
	// ConditionAvailable is True when the pool's MachineDeployment has at least as many
	// available machines as its rollout settings require (Cluster API's Available).
	ConditionAvailable = "Available"
	// ConditionRollingOut is True while machines that do not run the current templates
	// and version are replaced (Cluster API's RollingOut).
	ConditionRollingOut = "RollingOut"
	// ConditionScalingUp is True while the pool has fewer machines than it wants.
	ConditionScalingUp = "ScalingUp"
	// ConditionScalingDown is True while the pool has more machines than it wants.
	ConditionScalingDown = "ScalingDown"
	// ConditionUpToDate is True when every machine runs the current templates and
	// version (Cluster API's MachinesUpToDate).
	ConditionUpToDate = "UpToDate"
	// ConditionTemplatesIntact is False when someone else changed the spec of one of the
	// pool's current templates after the operator created it (its metadata.generation
	// moved past 1): templates are immutable by design, so the operator does not write
	// it back, names it, and rolls the pool onto a template of a new name at the pool's
	// next change. A pool whose templates were never changed does not carry it; one
	// that had it says True once its current templates are its own again.
	ConditionTemplatesIntact = "TemplatesIntact"
	// ConditionInUse is True on a class or location that pools still name.
	ConditionInUse = "InUse"
)
