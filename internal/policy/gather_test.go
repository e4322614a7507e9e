package policy_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// TestGatherReadsTheNamespaceAndTheRunningMachines: Gather takes the namespace's labels,
// and from the pool's MachineDeployment, when there is one, that machines run and the
// OS they boot; without it, nothing runs and there is no old class.
func TestGatherReadsTheNamespaceAndTheRunningMachines(t *testing.T) {
	ctx := context.Background()
	pool := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "workers"},
		Spec: v1.NodeGroupSpec{ClusterName: "tenant", LocationName: "in-cluster"}}
	class := &v1.NodeGroupClassSpec{OS: v1.OSKairos}
	location := &v1.LocationSpec{}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: map[string]string{"team": "a"}}}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: names.MachineDeploymentName("tenant", "workers")}}
	md.Spec.ClusterName = "tenant"
	md.Spec.Template.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{Kind: "TalosConfigTemplate", Name: "t"}
	proxmox := &v1.LocationSpec{Provider: v1.LocationProvider{Type: v1.ProviderProxmox, Proxmox: &v1.ProxmoxProvider{}}}

	for _, tc := range []struct {
		name    string
		objects []client.Object
		running bool
		oldOS   v1.OSFamily
		wantErr bool
		// location is the pool's, the KubeVirt one when nil; cluster the Cluster its
		// machines run under there.
		location *v1.LocationSpec
		cluster  string
	}{
		{name: "no MachineDeployment", objects: []client.Object{ns}, cluster: "tenant"},
		{name: "a running Talos pool", objects: []client.Object{ns, md}, running: true, oldOS: v1.OSTalos, cluster: "tenant"},
		{name: "a running pool moved to a Proxmox location", objects: []client.Object{ns, md}, running: true, oldOS: v1.OSTalos,
			location: proxmox, cluster: names.SatelliteName("tenant", "in-cluster")},
		{name: "no namespace", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objects...).Build()
			location := location
			if tc.location != nil {
				location = tc.location
			}
			in, err := policy.Gather(ctx, r, pool, class, location, "v1.35.4")
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error without the pool's namespace")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if in.Object != pool || in.Class != class || in.Location != location || in.ControlPlaneVersion != "v1.35.4" || in.OldObject != nil {
				t.Errorf("the caller's facts are not passed through: %+v", in)
			}
			if in.NamespaceLabels["team"] != "a" {
				t.Errorf("namespace labels %v", in.NamespaceLabels)
			}
			if in.MachineDeploymentExists != tc.running {
				t.Errorf("MachineDeploymentExists %v, want %v", in.MachineDeploymentExists, tc.running)
			}
			var oldOS v1.OSFamily
			if in.OldClass != nil {
				oldOS = in.OldClass.OS
			}
			if oldOS != tc.oldOS {
				t.Errorf("old OS %q, want %q", oldOS, tc.oldOS)
			}
			if tc.running != (in.MachineCluster == "tenant") || in.Cluster != tc.cluster {
				t.Errorf("machines under %q, pool's Cluster %q; want %q", in.MachineCluster, in.Cluster, tc.cluster)
			}
		})
	}
}
