package operator_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
)

// TestCacheDropsStatusesNobodyReads: the cache keeps the specs of Clusters and Kamaji
// control planes without their status, and keeps a pool's status, which the
// controller writes back.
func TestCacheDropsStatusesNobodyReads(t *testing.T) {
	transform := operator.CacheOptions().DefaultTransform
	condition := metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Ready", Message: "up"}

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "capi"}}},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KamajiControlPlane", Name: "tenant"}},
		Status: clusterv1.ClusterStatus{Phase: "Provisioned", Conditions: []metav1.Condition{condition}},
	}
	out, err := transform(cluster)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*clusterv1.Cluster)
	if got.Status.Phase != "" || len(got.Status.Conditions) > 0 || got.ManagedFields != nil {
		t.Errorf("the cached Cluster keeps its status or managed fields: %+v", got.Status)
	}
	if got.Spec.ControlPlaneRef.Name != "tenant" {
		t.Errorf("the cached Cluster lost its spec: %+v", got.Spec)
	}

	withStatus := func(group, kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1alpha2", "kind": kind,
			"metadata": map[string]any{"namespace": "tenant", "name": "tenant"},
			"spec":     map[string]any{"version": "v1.35.4"},
			"status":   map[string]any{"ready": true, "version": "v1.35.4"},
		}}
		return u
	}
	kcp := withStatus("controlplane.cluster.x-k8s.io", "KamajiControlPlane")
	if _, err := transform(kcp); err != nil {
		t.Fatal(err)
	}
	if _, ok := kcp.Object["status"]; ok {
		t.Error("the cached KamajiControlPlane keeps its status")
	}
	if v, _, _ := unstructured.NestedString(kcp.Object, "spec", "version"); v != "v1.35.4" {
		t.Errorf("the cached KamajiControlPlane lost spec.version: %v", kcp.Object["spec"])
	}
	other := withStatus("example.com", "Other")
	if _, err := transform(other); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Object["status"]; !ok {
		t.Error("the status of a kind the cache does not trim was dropped")
	}

	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "workers"},
		Status: v1.NodeGroupStatus{Conditions: []metav1.Condition{condition}}}
	if _, err := transform(ng); err != nil {
		t.Fatal(err)
	}
	if len(ng.Status.Conditions) != 1 {
		t.Error("the cached NodeGroup lost its status")
	}
}

// TestCacheKeepsWhatTheAutoscalerControllerReads: of the autoscaler's Deployment the
// cache keeps its metadata, spec.replicas and status (internal/controller/autoscaler's
// running reads them) and drops the Pod template.
func TestCacheKeepsWhatTheAutoscalerControllerReads(t *testing.T) {
	transform := operator.CacheOptions().DefaultTransform
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant-autoscaler", Generation: 3,
			Labels: map[string]string{"app": "x"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "nodegroup-operator"}}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "cluster-autoscaler", Image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.0"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Message: "quota"}}},
	}
	out, err := transform(dep)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.Deployment)
	if len(got.Spec.Template.Spec.Containers) != 0 || got.ManagedFields != nil {
		t.Errorf("the cached Deployment keeps its Pod template or managed fields: %+v", got.Spec.Template)
	}
	if got.Name != dep.Name || got.Generation != 3 || got.Labels["app"] != "x" || *got.Spec.Replicas != 1 ||
		got.Status.AvailableReplicas != 1 || got.Status.ObservedGeneration != 3 || got.Status.Conditions[0].Message != "quota" {
		t.Errorf("the cached Deployment lost what the autoscaler controller reads: %+v", got)
	}
}

// TestCacheTrimsMetadataNobodyReads: of Services only the name and version are held,
// of Secrets and the autoscaler's RBAC objects their labels and owners but no
// annotations; a kind the cache does not trim keeps its metadata.
func TestCacheTrimsMetadataNobodyReads(t *testing.T) {
	transform := operator.CacheOptions().DefaultTransform
	meta := func(group, version, kind string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "x", ResourceVersion: "7",
			Labels: map[string]string{"app.kubernetes.io/managed-by": "nodegroup-operator"}, Annotations: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Cluster", Name: "tenant"}}}}
		m.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
		return m
	}
	for _, tc := range []struct {
		obj                        *metav1.PartialObjectMetadata
		labels, annotations, owner bool
	}{
		{meta("", "v1", "Service"), false, false, false},
		{meta("", "v1", "Secret"), true, false, true},
		{meta("", "v1", "ServiceAccount"), true, false, true},
		{meta("rbac.authorization.k8s.io", "v1", "Role"), true, false, true},
		{meta("rbac.authorization.k8s.io", "v1", "RoleBinding"), true, false, true},
		{meta("example.com", "v1", "Other"), true, true, true},
	} {
		out, err := transform(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*metav1.PartialObjectMetadata)
		kind := tc.obj.Kind
		if got.Name != "x" || got.ResourceVersion != "7" {
			t.Errorf("%s: lost its name or version: %+v", kind, got.ObjectMeta)
		}
		if (len(got.Labels) > 0) != tc.labels || (len(got.Annotations) > 0) != tc.annotations || (len(got.OwnerReferences) > 0) != tc.owner {
			t.Errorf("%s: labels %v, annotations %v, owners %v; want labels %v, annotations %v, owners %v",
				kind, got.Labels, got.Annotations, got.OwnerReferences, tc.labels, tc.annotations, tc.owner)
		}
	}
}

// TestCacheKeepsWhatAPoolsStatusReads: of a MachineDeployment the cache keeps the
// replica counts, the conditions the pool mirrors and the Cluster it runs under; of a Machine its name, pool
// labels and phase, and the conditions that say why only while it is not running and
// ready, without their times.
func TestCacheKeepsWhatAPoolsStatusReads(t *testing.T) {
	byObject := operator.CacheOptions().ByObject
	transform := func(obj any) any {
		for k, o := range byObject {
			if fmt.Sprintf("%T", k) == fmt.Sprintf("%T", obj) {
				out, err := o.Transform(obj)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
		}
		t.Fatalf("no cache options for %T", obj)
		return nil
	}
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant-web"},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: "tenant-pve-1a2b3c4d"},
		Status: clusterv1.MachineDeploymentStatus{UpToDateReplicas: new(int32(2)), AvailableReplicas: new(int32(3)), Conditions: []metav1.Condition{
			{Type: "RollingOut", Status: metav1.ConditionTrue, Reason: "RollingOut", Message: "Rolling out 1 not up-to-date replicas"},
			{Type: "MachinesReady", Status: metav1.ConditionTrue, Reason: "Ready"},
		}}}
	gotMD := transform(md).(*clusterv1.MachineDeployment)
	if *gotMD.Status.UpToDateReplicas != 2 || *gotMD.Status.AvailableReplicas != 3 || len(gotMD.Status.Conditions) != 1 ||
		gotMD.Status.Conditions[0].Type != "RollingOut" || gotMD.Spec.ClusterName != md.Spec.ClusterName {
		t.Errorf("the cached MachineDeployment: %+v, under %q", gotMD.Status, gotMD.Spec.ClusterName)
	}

	machine := func(phase string, ready metav1.ConditionStatus) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tenant-web-x", Annotations: map[string]string{"a": "b"},
				Labels: map[string]string{names.LabelPool: "web", clusterv1.MachineDeploymentNameLabel: "tenant-web", "other": "x"}},
			Spec: clusterv1.MachineSpec{ClusterName: "tenant", ProviderID: "kubevirt://x"},
			Status: clusterv1.MachineStatus{Phase: phase, Addresses: clusterv1.MachineAddresses{{Type: "InternalIP", Address: "10.0.0.1"}},
				Conditions: []metav1.Condition{
					{Type: "InfrastructureReady", Status: ready, Reason: "R", Message: "m", LastTransitionTime: at, ObservedGeneration: 2},
					{Type: "Ready", Status: ready, Reason: "R", LastTransitionTime: at},
					{Type: "Paused", Status: metav1.ConditionFalse, Reason: "NotPaused"},
				}},
		}
	}
	running := transform(machine("Running", metav1.ConditionTrue)).(*clusterv1.Machine)
	if running.Name != "tenant-web-x" || running.Status.Phase != "Running" || len(running.Status.Conditions) != 0 ||
		len(running.Labels) != 2 || running.Annotations != nil || running.Spec.ProviderID != "" || running.Status.Addresses != nil {
		t.Errorf("the cached running Machine: %+v", running)
	}
	if !operator.MachineRunning(running) {
		t.Error("the cached copy of a running machine is not running")
	}
	failing := transform(machine("Provisioning", metav1.ConditionFalse)).(*clusterv1.Machine)
	if operator.MachineRunning(failing) || operator.MachineRunning(transform(machine("Running", metav1.ConditionFalse)).(*clusterv1.Machine)) {
		t.Error("the cached copy of a machine that is not running and ready is running")
	}
	if len(failing.Status.Conditions) != 2 || failing.Status.Conditions[0].Message != "m" ||
		!failing.Status.Conditions[0].LastTransitionTime.IsZero() || failing.Status.Conditions[0].ObservedGeneration != 0 {
		t.Errorf("the cached Machine that does not run: %+v", failing.Status)
	}
}

// TestCacheKeepsWhatApplyReadsOfTemplates: of a template the cache keeps its identity,
// the labels a clean-up selects by, its owners and its generation, which tells
// internal/apply that someone changed the spec of a template the operator made.
func TestCacheKeepsWhatApplyReadsOfTemplates(t *testing.T) {
	for obj, opts := range operator.CacheOptions().ByObject {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok || !slices.Contains(names.TemplateKinds, m.GroupVersionKind()) {
			continue
		}
		owner := metav1.OwnerReference{APIVersion: "nodegroup.io/v1alpha1", Kind: "NodeGroup", Name: "web", UID: "u"}
		in := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Namespace: "tenant", Name: "web-0123456789", UID: "t", ResourceVersion: "7", Generation: 2,
			Labels:          map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelPool: "web", "other": "x"},
			Annotations:     map[string]string{names.AnnotationTemplateHashVersion: "v2"},
			OwnerReferences: []metav1.OwnerReference{owner},
		}}
		out, err := opts.Transform(in)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*metav1.PartialObjectMetadata)
		if got.Name != in.Name || got.UID != "t" || got.ResourceVersion != "7" || got.Generation != 2 ||
			len(got.Labels) != 2 || got.Annotations != nil || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "u" {
			t.Errorf("the cached %s: %+v", m.Kind, got.ObjectMeta)
		}
	}
}
