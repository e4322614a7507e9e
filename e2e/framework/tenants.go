package framework

import (
	"context"
	"fmt"
)

// DefaultTenant is the name of Env.Tenant.
const DefaultTenant = "tenant"

// tenant starts Env.Tenant, the tenant cluster of every namespace UseTenant does not
// assign elsewhere.
func (e *Env) tenant(ctx context.Context) error {
	t, err := e.NewTenant(ctx, DefaultTenant, true)
	if err != nil {
		return err
	}
	e.Tenant = t
	return nil
}

// NewTenant starts another tenant cluster, logging into the environment's work folder,
// for a scenario that needs a tenant of its own (one whose API server it stops, say);
// Stop stops it. A full tenant runs what Env.Tenant runs: kube-controller-manager (CSR
// approval and signing, node lifecycle, garbage collection), kube-scheduler and kwok.
// Otherwise it is etcd and kube-apiserver only: Nodes cannot finish joining it, since
// nothing signs their certificates.
func (e *Env) NewTenant(ctx context.Context, name string, full bool) (*Tenant, error) {
	opts := TenantOptions{Name: name, Work: e.Work, Assets: e.assets}
	if full {
		opts.Controllers, opts.Scheduler, opts.Kwok = AllControllers, true, e.Bin
	}
	t, err := StartTenant(ctx, opts)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tenants = append(e.tenants, t)
	return t, nil
}

// UseTenant makes t the tenant cluster of every Cluster in namespace: the simulated
// Kamaji writes its kubeconfig and CA into their Secrets and points their endpoint at
// it. Call it before creating the namespace's Clusters.
func (e *Env) UseTenant(namespace string, t *Tenant) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byNamespace == nil {
		e.byNamespace = map[string]*Tenant{}
	}
	e.byNamespace[namespace] = t
}

// TenantFor is the tenant cluster of namespace's Clusters: the one UseTenant gave it,
// else Env.Tenant.
func (e *Env) TenantFor(namespace string) *Tenant {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.byNamespace[namespace]; t != nil {
		return t
	}
	return e.Tenant
}

// errNoTenant is what the simulator hears for a Cluster when no tenant has started.
func errNoTenant(namespace string) error {
	return fmt.Errorf("no tenant cluster for namespace %s", namespace)
}
