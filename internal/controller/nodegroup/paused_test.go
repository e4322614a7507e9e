package nodegroup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// live is what a pool's objects are: the MachineDeployment's resourceVersion and
// template names, and the names of every bootstrap template of the namespace.
type live struct {
	mdVersion, bootstrap, infrastructure string
	templates                            []string
}

func liveObjects(t *testing.T, ns, md string) live {
	t.Helper()
	d := &clusterv1.MachineDeployment{}
	mustGet(t, ns, md, d)
	var list talos.TalosConfigTemplateList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	l := live{mdVersion: d.ResourceVersion, bootstrap: d.Spec.Template.Spec.Bootstrap.ConfigRef.Name, infrastructure: d.Spec.Template.Spec.InfrastructureRef.Name}
	for _, tpl := range list.Items {
		l.templates = append(l.templates, tpl.Name)
	}
	return l
}

func (l live) String() string {
	return l.mdVersion + " " + l.bootstrap + " " + l.infrastructure + " [" + strings.Join(l.templates, " ") + "]"
}

func setClusterPaused(t *testing.T, ns string, paused bool) {
	t.Helper()
	c := &clusterv1.Cluster{}
	mustGet(t, ns, "tenant", c)
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Paused = &paused
	if err := env.Client.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

func annotatePool(t *testing.T, ng *v1.NodeGroup, key string, set bool) {
	t.Helper()
	cur := &v1.NodeGroup{}
	mustGet(t, ng.Namespace, ng.Name, cur)
	patch := client.MergeFrom(cur.DeepCopy())
	if set {
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, key, "")
	} else {
		delete(cur.Annotations, key)
	}
	if err := env.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
}

// appliedPool creates a pool of the name in a new tenant namespace and waits until it
// is applied and the operator is quiet.
func appliedPool(t *testing.T, name string) (string, *v1.NodeGroup) {
	t.Helper()
	ns := tenant(t)
	ng := pool(ns, name, nil)
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
	waitQuiet(t)
	return ns, ng
}

// waitPaused waits until the pool says Paused=True with a message that holds want.
func waitPaused(t *testing.T, ng *v1.NodeGroup, want string) {
	t.Helper()
	testenv.Eventually(t, "Paused=True: "+want, func() bool {
		got := &v1.NodeGroup{}
		mustGet(t, ng.Namespace, ng.Name, got)
		c := meta.FindStatusCondition(got.Status.Conditions, clusterv1.PausedCondition)
		if c == nil {
			return false
		}
		return c.Status == metav1.ConditionTrue && c.Reason == clusterv1.PausedReason && strings.Contains(c.Message, want)
	})
}

// TestPausedClusterLeftAlone: a pool of a paused Cluster (spec.paused) says so and sends
// nothing, not even on a forced resync; resumed, it drops the condition and changes
// nothing (no roll). A pool paused by its own annotation keeps its objects through a
// spec change and its deletion, and resumes both once the annotation goes.
func TestPausedClusterLeftAlone(t *testing.T) {
	ctx := context.Background()
	ns, ng := appliedPool(t, "held")
	before := liveObjects(t, ns, "tenant-held")

	setClusterPaused(t, ns, true)
	waitPaused(t, ng, "Cluster tenant has spec.paused set to true")
	waitQuiet(t)
	w := writes.Load()
	for range 10 {
		res, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ng)})
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != 0 {
			t.Fatalf("a paused pool asks to be requeued after %s: the Cluster's watch brings it back", res.RequeueAfter)
		}
	}
	if n := writes.Load() - w; n != 0 {
		t.Fatalf("ten resyncs of a paused pool sent %d writes, want 0", n)
	}

	setClusterPaused(t, ns, false)
	testenv.Eventually(t, "Paused removed on resume", func() bool {
		got := &v1.NodeGroup{}
		mustGet(t, ns, ng.Name, got)
		return meta.FindStatusCondition(got.Status.Conditions, clusterv1.PausedCondition) == nil
	})
	waitQuiet(t)
	if after := liveObjects(t, ns, "tenant-held"); after.String() != before.String() {
		t.Fatalf("resuming changed the pool's objects:\nbefore %s\nafter  %s", before, after)
	}

	// Paused by its own annotation: a new size and a deletion wait.
	annotatePool(t, ng, clusterv1.PausedAnnotation, true)
	waitPaused(t, ng, "NodeGroup held has the annotation cluster.x-k8s.io/paused")
	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.Resources.Memory = resource.MustParse("8Gi") })
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	waitQuiet(t)
	if after := liveObjects(t, ns, "tenant-held"); after.String() != before.String() {
		t.Fatalf("a paused pool's objects changed:\nbefore %s\nafter  %s", before, after)
	}
	held := &v1.NodeGroup{}
	mustGet(t, ns, ng.Name, held)
	if !controllerutil.ContainsFinalizer(held, nodegroup.Finalizer) {
		t.Fatal("the paused pool lost its finalizer")
	}

	annotatePool(t, ng, clusterv1.PausedAnnotation, false)
	testenv.Eventually(t, "the deletion resumes: MachineDeployment deleted", func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tenant-held"}, &clusterv1.MachineDeployment{})
		return apierrors.IsNotFound(err)
	})
}

// TestPoolDeletedByMoveKeepsItsObjects: clusterctl move deletes the source's pool after
// annotating it; the operator cleans up nothing (the objects are the moved cluster's,
// and the move deletes them itself), whether the Cluster is paused or already gone.
func TestPoolDeletedByMoveKeepsItsObjects(t *testing.T) {
	t.Run("ClusterPaused", func(t *testing.T) {
		// As the move leaves the source's Cluster until its last group: paused.
		poolDeletedByMove(t, func(ns string) { setClusterPaused(t, ns, true) })
	})
	t.Run("ClusterGone", func(t *testing.T) {
		// The Cluster deleted first, the worst order the move's last group allows.
		poolDeletedByMove(t, func(ns string) {
			c := &clusterv1.Cluster{}
			mustGet(t, ns, "tenant", c)
			if err := env.Client.Delete(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// poolDeletedByMove renders a pool, lets cluster do to its Cluster what the move does,
// then deletes the pool as clusterctl does (annotate, delete, remove the finalizers),
// and checks that the pool's objects stay as they were.
func poolDeletedByMove(t *testing.T, cluster func(ns string)) {
	ctx := context.Background()
	ns, ng := appliedPool(t, "moved")
	before := liveObjects(t, ns, "tenant-moved")

	cluster(ns)
	annotatePool(t, ng, clusterctlv1.DeleteForMoveAnnotation, true)
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	waitQuiet(t)
	if after := liveObjects(t, ns, "tenant-moved"); after.String() != before.String() {
		t.Fatalf("the moved pool's objects changed:\nbefore %s\nafter  %s", before, after)
	}
	cur := &v1.NodeGroup{}
	mustGet(t, ns, ng.Name, cur)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Finalizers = nil
	if err := env.Client.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pool gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1.NodeGroup{}))
	})
	mustGet(t, ns, "tenant-moved", &clusterv1.MachineDeployment{})
}

// TestPoolLeftMarkedByAFailedMoveIsFinalizedOnceUnmarked: a pool that a failed move (or
// its tenant) left with clusterctl's delete-for-move mark, deleted after its Cluster,
// is not cleaned up and says why in a Warning event; once someone removes the mark, the
// operator finalizes it, so the pool and its namespace do not hang.
func TestPoolLeftMarkedByAFailedMoveIsFinalizedOnceUnmarked(t *testing.T) {
	ctx := context.Background()
	ns, ng := appliedPool(t, "stale-mark")
	before := liveObjects(t, ns, "tenant-stale-mark")

	c := &clusterv1.Cluster{}
	mustGet(t, ns, "tenant", c)
	if err := env.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	annotatePool(t, ng, clusterctlv1.DeleteForMoveAnnotation, true)
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ng, "Warning", nodegroup.ReasonWaitingForMove, "remove the annotation")
	waitQuiet(t)
	if after := liveObjects(t, ns, "tenant-stale-mark"); after.String() != before.String() {
		t.Fatalf("the marked pool's objects changed:\nbefore %s\nafter  %s", before, after)
	}

	annotatePool(t, ng, clusterctlv1.DeleteForMoveAnnotation, false)
	testenv.Eventually(t, "the unmarked pool finalized and gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(ng), &v1.NodeGroup{}))
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tenant-stale-mark"}, &clusterv1.MachineDeployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the finalized pool's MachineDeployment: %v, want it deleted", err)
	}
}
