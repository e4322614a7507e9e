//go:build e2e

package main

import (
	"context"
	"fmt"
	"os"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// cluster is the tenant Cluster's name in every namespace.
const cluster = testenv.TenantCluster

// manager is the field manager of the harness's writes; autoscalerManager of its
// scale-ups and scale-downs, as the autoscaler's.
const (
	manager           = "faults"
	autoscalerManager = "cluster-autoscaler"
)

// world is what the harness asked for, to hold the live objects against.
type world struct {
	env  *framework.Env
	plan *plan
	// exists: the pool was created and not deleted; gone: deleted.
	exists, gone map[int]bool
	// replicas each pool should run (a fixed pool 1, an autoscaled one what the last
	// scale set); memory its resources' memory, which the wave raises.
	replicas map[int]int32
	// rotations counts the rotations asked per namespace.
	rotations map[int]int
	// machines are each pool's Machine UIDs at the last convergence; mds its
	// MachineDeployment's UID.
	machines map[int][]types.UID
	mds      map[int]types.UID
	// changed are the pools whose Machines the steps since the last convergence may
	// replace (changed, rotated, scaled); tokenBefore each namespace's bootstrap token
	// before its last rotation.
	changed     map[int]bool
	tokenBefore map[int]string
	// picked are the pools an outage's wave took; away is the namespace whose tenant
	// cluster is stopped, whose pools are not expected to converge meanwhile.
	picked map[int]bool
	away   string
	// kubelet restarts the operator whenever it ends, during the outages.
	kubelet *supervisor
}

func newWorld(env *framework.Env, p *plan) *world {
	return &world{env: env, plan: p, exists: map[int]bool{}, gone: map[int]bool{}, replicas: map[int]int32{},
		rotations: map[int]int{}, machines: map[int][]types.UID{}, mds: map[int]types.UID{},
		changed: map[int]bool{}, tokenBefore: map[int]string{}, picked: map[int]bool{}}
}

func namespace(ns int) string { return fmt.Sprintf("faults-%02d", ns) }

func (w *world) key(i int) client.ObjectKey {
	p := w.plan.pools[i]
	return client.ObjectKey{Namespace: namespace(p.ns), Name: p.name}
}

// setUp creates every namespace as a platform prepares a tenant: a Cluster with its
// Kamaji control plane, on the shared tenant cluster.
func (w *world) setUp(ctx context.Context, namespaces int) error {
	for ns := range namespaces {
		if err := testenv.CreateTenant(ctx, w.env.Client, namespace(ns), testenv.TenantOptions{
			Labels: map[string]string{"tenant": "true"}, ProviderEndpoint: true,
		}); err != nil {
			return fmt.Errorf("tenant %s: %w", namespace(ns), err)
		}
	}
	return nil
}

// start hands the operator the step's work.
func (w *world) start(ctx context.Context, st step) error {
	for _, i := range st.pools {
		w.changed[i] = true
	}
	switch st.kind {
	case cold:
		for _, i := range st.pools {
			if err := retry(ctx, func() error { return w.env.Client.Create(ctx, w.newPool(i)) }); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			w.exists[i] = true
			w.replicas[i] = 0
			if w.plan.pools[i].machines {
				w.replicas[i] = 1
			}
		}
	case wave:
		for _, i := range st.pools {
			if err := w.updatePool(ctx, i, func(ng *v1.NodeGroup) {
				ng.Spec.Resources.Memory = resource.MustParse("5Gi")
			}); err != nil {
				return err
			}
		}
	case deletion:
		for _, i := range st.pools {
			ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: w.key(i).Namespace, Name: w.key(i).Name}}
			if err := retry(ctx, func() error { return w.env.Client.Delete(ctx, ng) }); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			delete(w.exists, i)
			w.gone[i] = true
		}
	case rotation:
		w.rotations[st.namespace]++
		id := &corev1.Secret{}
		if err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace(st.namespace), Name: cluster + resolve.TalosSecretSuffix}, id); err != nil {
			return err
		}
		w.tokenBefore[st.namespace] = string(id.Data[resolve.TalosKeyBootstrapToken])
		c := &clusterv1.Cluster{}
		if err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace(st.namespace), Name: cluster}, c); err != nil {
			return err
		}
		patch := client.MergeFrom(c.DeepCopy())
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, joinidentity.AnnotationRotate, fmt.Sprintf("faults-%d", w.rotations[st.namespace]))
		return retry(ctx, func() error { return w.env.Client.Patch(ctx, c, patch) })
	case scaleUp, scaleDown:
		want := int32(1)
		if st.kind == scaleDown {
			want = 0
		}
		for _, i := range st.pools {
			if err := w.scale(ctx, i, want); err != nil {
				return err
			}
			w.replicas[i] = want
		}
	}
	return nil
}

// newPool is pool i: a Talos pool on the built-in class and location, fixed at one
// machine or autoscaled 0..2.
func (w *world) newPool(i int) *v1.NodeGroup {
	p := w.plan.pools[i]
	ng := &v1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace(p.ns), Name: p.name},
		Spec: v1.NodeGroupSpec{
			ClusterName: cluster, MinReplicas: 0, MaxReplicas: 2,
			Resources: &v1.MachineResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("4Gi")},
			Roles:     []string{"worker"},
		},
	}
	if p.machines {
		ng.Spec.MinReplicas, ng.Spec.MaxReplicas = 1, 1
	}
	return ng
}

func (w *world) updatePool(ctx context.Context, i int, change func(*v1.NodeGroup)) error {
	for {
		ng := &v1.NodeGroup{}
		if err := w.env.Client.Get(ctx, w.key(i), ng); err != nil {
			return err
		}
		change(ng)
		err := retry(ctx, func() error { return w.env.Client.Update(ctx, ng, client.FieldOwner(manager)) })
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// scale sets the pool's MachineDeployment's replicas through the scale subresource, as
// cluster-autoscaler's clusterapi provider does.
func (w *world) scale(ctx context.Context, i int, replicas int32) error {
	md := &clusterv1.MachineDeployment{}
	key := client.ObjectKey{Namespace: w.key(i).Namespace, Name: names.MachineDeploymentName(cluster, w.key(i).Name)}
	if err := w.env.Client.Get(ctx, key, md); err != nil {
		return err
	}
	s := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	return retry(ctx, func() error {
		return w.env.Client.SubResource("scale").Update(ctx, md, client.WithSubResourceBody(s), client.FieldOwner(autoscalerManager))
	})
}

// retry runs write until the API server gives an answer that is not a failure to call
// the operator's webhook (the operator is down: the harness has just killed it) or of
// its own (its return from an outage), for at most 3 minutes, as a client would.
func retry(ctx context.Context, write func() error) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := write()
		if err == nil || !(apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err)) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// converged says what still moves, nil once the operator is ready and every pool is where
// the harness asked: each
// existing pool Ready for its generation with the machines it should run, each deleted
// pool gone, each rotation finished (no previous token kept).
func (w *world) converged(ctx context.Context) error {
	if err := w.env.OperatorReady(ctx); err != nil {
		return err
	}
	var list v1.NodeGroupList
	if err := w.env.Client.List(ctx, &list, client.MatchingLabels{}); err != nil {
		return err
	}
	live := map[client.ObjectKey]*v1.NodeGroup{}
	for i := range list.Items {
		live[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
	for i := range w.exists {
		if w.key(i).Namespace == w.away {
			continue
		}
		ng := live[w.key(i)]
		if ng == nil {
			return fmt.Errorf("pool %s is missing", w.key(i))
		}
		ready := meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionReady)
		switch {
		case ng.Status.ObservedGeneration != ng.Generation:
			return fmt.Errorf("pool %s: status for generation %d of %d", w.key(i), ng.Status.ObservedGeneration, ng.Generation)
		case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != ng.Generation || ng.Status.Summary != "Ready":
			return fmt.Errorf("pool %s: %s", w.key(i), ng.Status.Summary)
		case ng.Status.Replicas != w.replicas[i] || ng.Status.ReadyReplicas != w.replicas[i]:
			return fmt.Errorf("pool %s: %d replicas, %d ready, want %d", w.key(i), ng.Status.Replicas, ng.Status.ReadyReplicas, w.replicas[i])
		}
	}
	for i := range w.gone {
		if ng := live[w.key(i)]; ng != nil {
			return fmt.Errorf("deleted pool %s is still there (finalizers %v)", w.key(i), ng.Finalizers)
		}
	}
	for ns := range w.rotations {
		if err := w.rotationDone(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// waitConverged polls converged, then the invariants, until both hold and the operator
// has sent no write for quiet, or until timeout. It returns how long after since the
// state that held first held (a write after it starts the count again), and the
// invariants still broken at the end.
func (w *world) waitConverged(ctx context.Context, since time.Time, timeout, quiet time.Duration) (time.Duration, []string, error) {
	deadline := time.Now().Add(timeout)
	var breaks []string
	var err error
	var held time.Time
	lastSaid := time.Now()
	lastWrites := w.env.Proxy.Writes()
	for {
		if n := w.env.Proxy.Writes(); n != lastWrites {
			lastWrites, held = n, time.Time{}
		}
		if err = w.converged(ctx); err == nil {
			if breaks, err = w.invariants(ctx); err == nil && len(breaks) == 0 {
				if held.IsZero() {
					held = time.Now()
				}
				if time.Since(held) >= quiet {
					w.record(ctx)
					return held.Sub(since), nil, nil
				}
			}
		}
		if err != nil || len(breaks) > 0 {
			held = time.Time{}
			if time.Since(lastSaid) > 20*time.Second {
				lastSaid = time.Now()
				why := fmt.Sprint(err)
				if err == nil {
					why = fmt.Sprintf("%d invariants broken, e.g. %s", len(breaks), breaks[0])
				}
				fmt.Fprintf(os.Stderr, "faults: %s after %s: %s\n", "not converged", time.Since(since).Round(time.Second), why)
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				breaks = append(breaks, "not converged: "+err.Error())
			}
			w.record(ctx)
			return time.Since(since), breaks, nil
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
