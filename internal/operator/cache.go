package operator

import (
	"slices"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/cachedspec"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
)

// CacheOptions keeps the manager's cache to what the operator needs, not every object
// of the management cluster and not every field: at thousands of pools the cache is
// most of the operator's memory.
//
//   - its own MachineDeployments, holding only their metadata, the replicas, the
//     template references, the replica counts of the status and the conditions the
//     pool mirrors (MachineDeploymentConditions): what the controller, the webhook
//     and internal/apply read;
//   - its own health checks, holding only their metadata (internal/apply compares
//     nothing else);
//   - the MachineSets of its pools, holding only their metadata and template references
//     (what a clean-up of superseded templates reads); Cluster API rewrites their status
//     with every machine, and a rollout holds two per pool;
//   - the Machines of its pools, holding only their name, pool labels, phase and, of a
//     machine that is not running and ready, the conditions that say why (see
//     trimMachine): a running machine is a few hundred bytes;
//   - the metadata of its templates (their content is large and never read back),
//     down to the labels a clean-up selects by, the owners and the generation (which
//     tells that someone changed a template's spec: internal/apply reports it);
//   - of Clusters and Kamaji control planes, no status: only their specs are read, and
//     their status is the larger part of them;
//   - of ServiceAccounts, Roles, RoleBindings and Deployments, only the autoscaler's
//     (autoscalerObjects): one of anyone else is never held in memory;
//   - of the autoscaler's Deployments, their metadata, replicas and status, which tell
//     whether it runs: the Pod template is most of a Deployment, and the autoscaler's
//     applier reads it live;
//   - of the Services and Secrets watched as metadata, and of the autoscaler's
//     ServiceAccounts, Roles and RoleBindings, nothing their readers do not look at
//     (trimUnreadMetadata), and of MachineSets no annotations;
//   - of SatelliteControlPlanes and ProxmoxClusters, only the operator's (its
//     satellites');
//   - of every object, no managedFields and no last-applied-configuration annotation,
//     which nothing reads from the cache and which are often the larger part of it;
//     and the strings thousands of objects repeat (namespaces, label and annotation
//     keys and values, owners' kinds, condition reasons and messages) held once.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{names.LabelManagedBy: names.ManagedByValue})
	poolReq, _ := labels.NewRequirement(names.LabelPool, selection.Exists, nil)
	byObject := map[client.Object]cache.ByObject{
		&clusterv1.MachineDeployment{}:  {Label: managed, Transform: trimMachineDeployment},
		&clusterv1.MachineHealthCheck{}: {Label: managed, Transform: trimMachineHealthCheck},
		&clusterv1.MachineSet{}:         {Label: labels.NewSelector().Add(*poolReq), Transform: trimMachineSet},
		&clusterv1.Machine{}:            {Label: labels.NewSelector().Add(*poolReq), Transform: trimMachine},
		// The satellites' objects: only the operator's.
		&cpv1.SatelliteControlPlane{}: {Label: managed},
		&capmox.ProxmoxCluster{}:      {Label: managed},
	}
	for _, gvk := range append(slices.Clip(names.TemplateKinds), names.ProxmoxTemplateKind) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		byObject[m] = cache.ByObject{Label: managed, Transform: trimTemplate}
	}
	autoscalerObjects(byObject)
	return cache.Options{ByObject: byObject, DefaultTransform: compact}
}

// autoscalerObjects restricts the cache of the autoscaler's kinds to the operator's
// autoscaler objects. Of the ServiceAccount, Role and RoleBinding the cache holds only
// metadata (internal/controller/autoscaler watches them so), of the Deployment what
// running reads (compact trims it): the applier reads the objects live, so the cache is
// for their events.
func autoscalerObjects(byObject map[client.Object]cache.ByObject) {
	ours := labels.SelectorFromSet(labels.Set{names.LabelManagedBy: names.ManagedByValue, autoscaler.LabelName: "cluster-autoscaler"})
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &appsv1.Deployment{}} {
		byObject[obj] = cache.ByObject{Label: ours}
	}
}

// compact is the transform of every cached object: see CacheOptions.
func compact(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	switch o := obj.(type) {
	case *clusterv1.Cluster:
		o.Status = clusterv1.ClusterStatus{}
	case *appsv1.Deployment:
		o.Annotations = nil
		obj = &appsv1.Deployment{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta,
			Spec: appsv1.DeploymentSpec{Replicas: o.Spec.Replicas}, Status: o.Status}
	case *metav1.PartialObjectMetadata:
		trimUnreadMetadata(o)
	case *unstructured.Unstructured:
		if o.GroupVersionKind().GroupKind() == kamaji.ControlPlaneGVK.GroupKind() {
			delete(o.Object, "status")
		}
	case *v1.NodeGroup:
		o.Spec.ClusterName = intern(o.Spec.ClusterName)
		o.Spec.NodeGroupClassName = intern(o.Spec.NodeGroupClassName)
		o.Spec.LocationName = intern(o.Spec.LocationName)
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			c.Type, c.Status = intern(c.Type), metav1.ConditionStatus(intern(string(c.Status)))
			c.Reason, c.Message = intern(c.Reason), intern(c.Message)
		}
	}
	compactMeta(obj)
	return obj, nil
}

// trimUnreadMetadata drops what no reader of the cache looks at in the metadata the
// operator watches of other kinds (its templates have their own transform):
//   - of a Service, everything but its name and version (poolsOfService maps by name,
//     the resolver compares resourceVersions);
//   - of a Secret, its annotations (the watches map by name; internal/credentials reads
//     labels and owners);
//   - of the autoscaler's ServiceAccount, Role and RoleBinding, their annotations (the
//     autoscaler controller's remove reads labels and owners).
//
// The informers set the kind on what they watch as metadata, so it can be told here.
func trimUnreadMetadata(m *metav1.PartialObjectMetadata) {
	switch m.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Service"}:
		m.Labels, m.Annotations, m.OwnerReferences, m.Finalizers = nil, nil, nil, nil
	case schema.GroupKind{Kind: "Secret"}, schema.GroupKind{Kind: "ServiceAccount"},
		schema.GroupKind{Group: rbacv1.GroupName, Kind: "Role"}, schema.GroupKind{Group: rbacv1.GroupName, Kind: "RoleBinding"}:
		m.Annotations = nil
	}
}

// lastApplied is kubectl's client-side apply annotation: a copy of the whole object.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func compactMeta(obj metav1.Object) {
	if obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	obj.SetNamespace(intern(obj.GetNamespace()))
	if l := obj.GetLabels(); len(l) > 0 {
		obj.SetLabels(internMap(l))
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		delete(a, lastApplied)
		obj.SetAnnotations(internMap(a))
	}
	refs := obj.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = intern(refs[i].APIVersion), intern(refs[i].Kind)
	}
	fins := obj.GetFinalizers()
	for i := range fins {
		fins[i] = intern(fins[i])
	}
}

func trimMachineDeployment(in any) (any, error) {
	md, ok := in.(*clusterv1.MachineDeployment)
	if !ok {
		return in, nil
	}
	out := &clusterv1.MachineDeployment{TypeMeta: md.TypeMeta, ObjectMeta: md.ObjectMeta}
	compactMeta(out)
	// What the trimmed spec no longer shows, as a digest: apply compares it to tell a
	// scale from a change of the spec without a dry run.
	out.SetAnnotations(cachedspec.Annotate(out.GetAnnotations(), md))
	out.Spec.Replicas = md.Spec.Replicas
	// The Cluster its machines run under: a pool may not move them to another
	// (policy.Gather).
	out.Spec.ClusterName = md.Spec.ClusterName
	out.Spec.Template.Spec = templateRefs(md.Spec.Template.Spec)
	out.Status.Replicas = md.Status.Replicas
	out.Status.ReadyReplicas = md.Status.ReadyReplicas
	out.Status.AvailableReplicas = md.Status.AvailableReplicas
	out.Status.UpToDateReplicas = md.Status.UpToDateReplicas
	out.Status.Conditions = keepConditions(md.Status.Conditions, MachineDeploymentConditions)
	return out, nil
}

// MachineDeploymentConditions are the conditions of a MachineDeployment its pool
// mirrors, and all the cache keeps of them.
var MachineDeploymentConditions = []string{
	clusterv1.AvailableCondition, clusterv1.RollingOutCondition, clusterv1.ScalingUpCondition,
	clusterv1.ScalingDownCondition, clusterv1.MachinesUpToDateCondition,
}

// MachineConditions are the conditions of a Machine that say why it is not running, in
// the order they are looked at; the cache keeps them (and nothing of them but type,
// status, reason and message) only of a machine that is not running and ready.
var MachineConditions = []string{
	clusterv1.DeletingCondition, clusterv1.BootstrapConfigReadyCondition, clusterv1.InfrastructureReadyCondition,
	clusterv1.MachineNodeHealthyCondition, clusterv1.MachineHealthCheckSucceededCondition, clusterv1.ReadyCondition,
}

// MachineRunning says whether a machine is running and ready: in the Running phase, not
// being deleted, and with no Ready condition that is not True. The cache keeps no
// condition of such a machine, so the answer is the same of the cached copy.
func MachineRunning(m *clusterv1.Machine) bool {
	if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || !m.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range m.Status.Conditions {
		if c.Type == clusterv1.ReadyCondition {
			return c.Status == metav1.ConditionTrue
		}
	}
	return true
}

// trimMachine keeps of a Machine what a pool's status reads: its name, the pool and
// MachineDeployment labels, its phase, and the conditions of MachineConditions while it
// is not running (MachineRunning).
func trimMachine(in any) (any, error) {
	m, ok := in.(*clusterv1.Machine)
	if !ok {
		return in, nil
	}
	out := &clusterv1.Machine{TypeMeta: m.TypeMeta, ObjectMeta: identity(m.ObjectMeta, names.LabelPool, clusterv1.MachineDeploymentNameLabel)}
	compactMeta(out)
	out.Status.Phase = intern(m.Status.Phase)
	if !MachineRunning(m) {
		out.Status.Conditions = keepConditions(m.Status.Conditions, MachineConditions)
	}
	return out, nil
}

// keepConditions are the conditions of the given types, their strings interned, without
// their times and generations: nobody reads them, and a change of them alone is no
// change to what the cache holds.
func keepConditions(conds []metav1.Condition, types []string) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		if slices.Contains(types, c.Type) {
			out = append(out, metav1.Condition{Type: intern(c.Type), Status: metav1.ConditionStatus(intern(string(c.Status))),
				Reason: intern(c.Reason), Message: intern(c.Message)})
		}
	}
	return out
}

func trimMachineSet(in any) (any, error) {
	ms, ok := in.(*clusterv1.MachineSet)
	if !ok {
		return in, nil
	}
	out := &clusterv1.MachineSet{TypeMeta: ms.TypeMeta, ObjectMeta: ms.ObjectMeta}
	out.Annotations = nil // Cluster API's replica and revision bookkeeping: nobody reads it
	compactMeta(out)
	out.Spec.Template.Spec = templateRefs(ms.Spec.Template.Spec)
	return out, nil
}

// templateRefs is a machine spec's references to its templates, and nothing else.
func templateRefs(spec clusterv1.MachineSpec) clusterv1.MachineSpec {
	var out clusterv1.MachineSpec
	out.Bootstrap.ConfigRef = internRef(spec.Bootstrap.ConfigRef)
	out.InfrastructureRef = internRef(spec.InfrastructureRef)
	return out
}

func internRef(r clusterv1.ContractVersionedObjectReference) clusterv1.ContractVersionedObjectReference {
	r.APIGroup, r.Kind = intern(r.APIGroup), intern(r.Kind)
	return r
}

func trimMachineHealthCheck(in any) (any, error) {
	mhc, ok := in.(*clusterv1.MachineHealthCheck)
	if !ok {
		return in, nil
	}
	out := &clusterv1.MachineHealthCheck{TypeMeta: mhc.TypeMeta, ObjectMeta: mhc.ObjectMeta}
	compactMeta(out)
	out.SetAnnotations(cachedspec.Annotate(out.GetAnnotations(), mhc))
	return out, nil
}

func trimTemplate(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: identity(m.ObjectMeta, names.LabelManagedBy, names.LabelPool)}
	out.OwnerReferences = m.OwnerReferences
	out.Generation = m.Generation
	compactMeta(out)
	return out, nil
}

// identity is what the cache keeps of an object's metadata when it keeps the least:
// its name, namespace, uid, version, deletion and the labels of keys.
func identity(m metav1.ObjectMeta, keys ...string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp, Labels: map[string]string{}}
	for _, k := range keys {
		if v, ok := m.Labels[k]; ok {
			out.Labels[k] = v
		}
	}
	return out
}

// internMaxLen: strings longer than this (condition messages naming a pool, say) are
// seldom repeated, and are held as they are.
const internMaxLen = 128

// intern returns s held once however many cached objects carry it (unique.Make's
// canonical copy, which goes when no cached object holds it any more).
func intern(s string) string {
	if s == "" || len(s) > internMaxLen {
		return s
	}
	return unique.Make(s).Value()
}

func internMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}
