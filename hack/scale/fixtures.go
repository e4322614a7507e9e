package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// kairosClass is a Kairos class with its own image, as a platform publishes one (the
// built-in kairos class needs the catalog's disk, which is not published yet).
const kairosClass = "kairos-scale"

// pool is one NodeGroup of the benchmark.
type pool struct {
	namespace, name string
	os              v1.OSFamily
	// tenant is the index of its namespace, index its place among all pools.
	tenant, index int
	// bumped: the change wave changes this pool.
	bumped bool
}

func (p *pool) key() string { return p.namespace + "/" + p.name }

// poolSpec is the spec of the j-th pool of a namespace: even pools Talos, odd pools
// Kairos, with sizes, ranges, labels and taints varied as tenants vary them.
func poolSpec(j int) v1.NodeGroupSpec {
	s := v1.NodeGroupSpec{
		ClusterName:  testenv.TenantCluster,
		LocationName: v1.BuiltinLocation,
		MinReplicas:  int32(j % 3),
		MaxReplicas:  int32(3 + j%8),
		Resources: &v1.MachineResources{
			CPU:    resource.MustParse(fmt.Sprint(2 + 2*(j%2))),
			Memory: resource.MustParse(fmt.Sprintf("%dGi", 4+4*(j%3))),
		},
		Roles:  []string{"worker"},
		Labels: map[string]v1.LabelValue{"workload": v1.LabelValue(fmt.Sprintf("w%d", j))},
	}
	if j%2 == 0 {
		s.NodeGroupClassName = v1.BuiltinTalosClass
	} else {
		s.NodeGroupClassName = kairosClass
	}
	if j%4 == 0 {
		s.Taints = []v1.Taint{{Key: "workload", Value: fmt.Sprintf("w%d", j), Effect: "NoSchedule"}}
	}
	return s
}

func (h *harness) createFixtures(ctx context.Context) error {
	class := &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: kairosClass}, Spec: v1.NodeGroupClassSpec{
		OS: v1.OSKairos,
		Image: &v1.ClassImage{
			Reference:         "registry.example.com/platform/kairos-worker@sha256:4f8c3a0e2b1d9c7a6e5f4d3c2b1a09f8e7d6c5b4a3928170f6e5d4c3b2a19081",
			KubernetesVersion: "v1.35.4",
		},
	}}
	if err := h.admin.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	n, per := h.cfg.Namespaces, h.cfg.PoolsPerNamespace
	h.tenant = make([]string, n)
	h.pools = make([]*pool, n*per)
	for i := range n {
		h.tenant[i] = fmt.Sprintf("scale-%04d", i)
		for j := range per {
			spec := poolSpec(j)
			os := v1.OSTalos
			if spec.NodeGroupClassName == kairosClass {
				os = v1.OSKairos
			}
			p := &pool{namespace: h.tenant[i], name: fmt.Sprintf("w%d", j), os: os, tenant: i, index: i*per + j}
			h.pools[p.index] = p
			h.byKey[p.key()] = p
		}
	}
	var created atomic.Int64
	err := parallel(ctx, 16, n, func(ctx context.Context, i int) error {
		if err := testenv.CreateTenant(ctx, h.admin, h.tenant[i], testenv.TenantOptions{Kubeconfig: h.tenantKubeconfig}); err != nil {
			return fmt.Errorf("tenant %s: %w", h.tenant[i], err)
		}
		for j := range per {
			p := h.pools[i*per+j]
			ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.name}, Spec: poolSpec(j)}
			if err := h.admin.Create(ctx, ng); err != nil {
				return fmt.Errorf("pool %s: %w", p.key(), err)
			}
		}
		if c := created.Add(1); c%200 == 0 {
			h.logf("    %d of %d namespaces", c, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range h.pools {
		if p.os == v1.OSTalos {
			h.res.TalosPools++
		} else {
			h.res.KairosPools++
		}
	}
	w, err := startPoolWatch(ctx, h.env.Config, h.byKey)
	if err != nil {
		return err
	}
	h.watch = w
	return nil
}

// parallel runs f for 0..n-1 on at most workers goroutines and returns the first
// error; after an error no new index is started.
func parallel(ctx context.Context, workers, n int, f func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err // another index failed while this one waited for a worker
			}
			return f(ctx, i)
		})
	}
	return g.Wait()
}
