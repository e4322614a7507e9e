package framework

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
)

// simulator runs the provider simulator in this process, as the management cluster's
// admin, until the control plane stops.
func (e *Env) simulator(context.Context) error {
	return e.cp.RunManager(ctrl.Options{HealthProbeBindAddress: "0"}, func(mgr ctrl.Manager) error {
		return simulator.Add(mgr, simulator.Options{Tenants: e.simulatedTenant, ProxmoxSites: ProxmoxSites})
	})
}

// ProxmoxSites are the Proxmox VE clusters the simulated capmox reaches: one in the lab
// next door and one on rented servers over the WAN, each accepting its own API token.
var ProxmoxSites = []simulator.ProxmoxSite{
	{URL: "https://pve-lab.e2e.example:8006/api2/json", Token: "capmox@pve!lab", Secret: "4a0d9c1e-lab-0000-0000-000000000001"},
	{URL: "https://pve-wan.e2e.example:8006/api2/json", Token: "capmox@pve!wan", Secret: "9b3e7f2a-wan-0000-0000-000000000002"},
}

// simulatedTenant is the tenant cluster of a Cluster, as the simulated Kamaji runs it.
func (e *Env) simulatedTenant(cluster client.ObjectKey) (simulator.Tenant, error) {
	t := e.TenantFor(cluster.Namespace)
	if t == nil {
		return simulator.Tenant{}, errNoTenant(cluster.Namespace)
	}
	return t.Simulated(), nil
}

// Simulated is the tenant as the simulator's Kamaji serves it: its admin kubeconfig and
// its CA.
func (t *Tenant) Simulated() simulator.Tenant {
	t.mu.Lock()
	defer t.mu.Unlock()
	return simulator.Tenant{Kubeconfig: t.Kubeconfig, CACert: t.CACert, CAKey: t.CAKey}
}
