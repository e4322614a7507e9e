package autoscaler_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	autoscalerctl "github.com/nodegroup-io/nodegroup-operator/internal/controller/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestAbleToScaleUpFromTheAutoscalersStatus: a pool reports what its cluster's
// autoscaler says of it, read from the autoscaler's status ConfigMap in the tenant
// cluster (here the test's API server, reached through a real <cluster>-kubeconfig):
// nothing while the autoscaler does not run, then its verdict per pool, and nothing once
// the pool is fixed-size.
func TestAbleToScaleUpFromTheAutoscalersStatus(t *testing.T) {
	ctx := context.Background()
	ns := newTenantWithout(t)
	setKubeconfig(t, ns, env.KubeConfig())
	ng := newPool(t, ns, "burst", 0, 3)
	waitRendered(t, ng)
	up := waitPoolConditionOf(t, ng, v1.ConditionAbleToScaleUp, metav1.ConditionUnknown, autoscaler.ReasonNotRunning)
	if !strings.Contains(up.Message, "see AutoscalerReady") {
		t.Errorf("AutoscalerNotRunning message: %q", up.Message)
	}

	// The Deployment controller's part: the autoscaler's Pod is available.
	dep := &appsv1.Deployment{}
	mustGet(t, ns, name, dep)
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := env.Client.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	waitPoolCondition(t, ng, metav1.ConditionTrue, autoscalerctl.ReasonRunning)
	up = waitPoolConditionOf(t, ng, v1.ConditionAbleToScaleUp, metav1.ConditionUnknown, autoscaler.ReasonNoStatus)
	if !strings.Contains(up.Message, "kube-system/cluster-autoscaler-status") {
		t.Errorf("NoAutoscalerStatus message does not name the ConfigMap: %q", up.Message)
	}

	// The autoscaler's part: its status, first with the pool at its maximum.
	md := names.MachineDeploymentName(cluster, ng.Name)
	group := autoscaler.NodeGroupName(types.NamespacedName{Namespace: ns, Name: md})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: autoscaler.StatusNamespace, Name: autoscaler.StatusConfigMapName}}
	setStatus := func(doc string) {
		t.Helper()
		cm.Data = map[string]string{autoscaler.StatusKey: doc}
		err := env.Client.Update(ctx, cm)
		if apierrors.IsNotFound(err) || (err == nil && cm.UID == "") {
			cm.ResourceVersion = ""
			err = env.Client.Create(ctx, cm)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cm) })
	setStatus("autoscalerStatus: Running\nnodeGroups:\n- name: " + group +
		"\n  health: {status: Healthy, cloudProviderTarget: 3, minSize: 0, maxSize: 3}\n  scaleUp: {status: NoActivity}\n")
	up = waitPoolConditionOf(t, ng, v1.ConditionAbleToScaleUp, metav1.ConditionFalse, autoscaler.ReasonMaxSizeReached)
	if !strings.Contains(up.Message, "spec.maxReplicas") {
		t.Errorf("MaxSizeReached message does not name the field: %q", up.Message)
	}

	// A failed scale-up: the autoscaler's own reason reaches the pool.
	setStatus("nodeGroups:\n- name: " + group +
		"\n  health: {status: Healthy, cloudProviderTarget: 1, maxSize: 3}\n  scaleUp: {status: Backoff, backoffInfo: {errorCode: timeout, errorMessage: nodes did not register}}\n")
	up = waitPoolConditionOf(t, ng, v1.ConditionAbleToScaleUp, metav1.ConditionFalse, autoscaler.ReasonBackoff)
	if !strings.Contains(up.Message, "timeout: nodes did not register") {
		t.Errorf("Backoff message lacks the autoscaler's reason: %q", up.Message)
	}

	// Within its limits again.
	setStatus("nodeGroups:\n- name: " + group + "\n  health: {status: Healthy, cloudProviderTarget: 1, maxSize: 3}\n  scaleUp: {status: NoActivity}\n")
	waitPoolConditionOf(t, ng, v1.ConditionAbleToScaleUp, metav1.ConditionTrue, autoscaler.ReasonWithinLimits)

	// The platform takes the cluster's autoscaler over: its status is no longer read,
	// and the last verdict is not left standing.
	patchCluster(t, ns, func(c *clusterv1.Cluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[autoscalerctl.AnnotationManaged] = "false"
	})
	waitPoolConditionOf(t, ng, v1.ConditionAbleToScaleUp, metav1.ConditionUnknown, autoscalerctl.ReasonManagedElsewhere)

	// Made fixed-size: neither autoscaler condition stays on the pool.
	resize(t, ng, 2, 2)
	testenv.Eventually(t, "the autoscaler conditions gone from the fixed pool", func() bool {
		got := &v1.NodeGroup{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ng), got); err != nil {
			return false
		}
		return meta.FindStatusCondition(got.Status.Conditions, v1.ConditionAbleToScaleUp) == nil &&
			meta.FindStatusCondition(got.Status.Conditions, v1.ConditionAutoscalerReady) == nil
	})
}
