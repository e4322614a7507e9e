package satellite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cpv1 "github.com/nodegroup-io/nodegroup-operator/api/controlplane/v1alpha1"
	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/satellite"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

const (
	cluster       = "tenant"
	platformNS    = "platform"
	admittedLabel = "proxmox.example.com/allowed"
)

// locations are two Proxmox locations with their own credentials, admitting only
// namespaces labelled admittedLabel, created once: TestSatellitePerLocation's. A
// location serves one tenant cluster (policy.LocationTaken), so the other tests make
// their own with newLocation.
var locations = map[string]string{} // location -> its credentials Secret's token

func setupLocations(t *testing.T) {
	t.Helper()
	if len(locations) > 0 {
		return
	}
	for i, name := range []string{"pve-lab", "pve-rented"} {
		locations[name] = newLocation(t, name, 20+i)
	}
}

// newLocation creates a Proxmox location admitting namespaces labelled admittedLabel,
// with its own credentials Secret and the addresses 10.<octet>.0.10-99, and returns its
// token.
func newLocation(t *testing.T, name string, octet int) string {
	t.Helper()
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token := fmt.Sprintf("token-of-%s", name)
	env.MustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: name + "-credentials"},
		Data: map[string][]byte{"url": []byte(fmt.Sprintf("https://%s.example.com:8006", name)), "token": []byte("root@pam!capmox"), "secret": []byte(token)}})
	env.MustCreate(t, &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.LocationSpec{
		AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{admittedLabel: "true"}},
		Provider: v1.LocationProvider{Type: v1.ProviderProxmox, Proxmox: &v1.ProxmoxProvider{
			CredentialsRef:  v1.SecretReference{Namespace: platformNS, Name: name + "-credentials"},
			TenantAPIServer: &v1.ProxmoxTenantAPIServer{Domain: name + ".example.com", Port: 443},
			IPv4:            &v1.ProxmoxIPPool{Addresses: []string{fmt.Sprintf("10.%d.0.10-10.%d.0.99", octet, octet)}, Prefix: 24, Gateway: fmt.Sprintf("10.%d.0.1", octet)},
			DNSServers:      []string{"10.20.0.2"},
			Network:         v1.ProxmoxNetwork{Bridge: "vmbr0"},
			Template:        v1.ProxmoxTemplate{Tags: []string{"talos"}},
		}},
	}})
	return token
}

var tenantSeq int

// tenant creates a namespace (admitted by the locations or not) with a Kamaji Cluster,
// its KamajiControlPlane (initialized, at v1.35.4) and its <cluster>-kubeconfig.
func tenant(t *testing.T, admitted bool) string {
	t.Helper()
	setupLocations(t)
	tenantSeq++
	ns := fmt.Sprintf("sat-%d", tenantSeq)
	labels := map[string]string{}
	if admitted {
		labels[admittedLabel] = "true"
	}
	env.MustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})

	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	kcp.SetNamespace(ns)
	kcp.SetName(cluster)
	set(t, kcp, "v1.35.4", "spec", "version")
	set(t, kcp, "default", "spec", "dataStoreName")
	env.MustCreate(t, kcp)
	set(t, kcp, true, "status", "initialization", "controlPlaneInitialized")
	set(t, kcp, true, "status", "ready")
	set(t, kcp, "v1.35.4", "status", "version")
	if err := env.Client.Status().Update(t.Context(), kcp); err != nil {
		t.Fatal(err)
	}

	env.MustCreate(t, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}, Spec: clusterv1.ClusterSpec{
		ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "tenant." + ns + ".svc", Port: 6443},
		ClusterNetwork: clusterv1.ClusterNetwork{
			Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/16"}},
			Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
		},
		ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: kamaji.ControlPlaneGVK.Group, Kind: kamaji.ControlPlaneGVK.Kind, Name: cluster},
	}})
	env.MustCreate(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Type:       clusterv1.ClusterSecretType, Data: map[string][]byte{"value": kubeconfig(t, "admin-1")},
	})
	return ns
}

// kubeconfig is a tenant admin kubeconfig as Kamaji's provider writes it, with token.
func kubeconfig(t *testing.T, token string) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cluster] = &clientcmdapi.Cluster{Server: "https://tenant.svc:6443", CertificateAuthorityData: []byte("ca")}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func set(t *testing.T, u *unstructured.Unstructured, value any, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		t.Fatal(err)
	}
}

func pool(t *testing.T, ns, name, location string) *v1.NodeGroup {
	t.Helper()
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.NodeGroupSpec{
		ClusterName: cluster, LocationName: location, MinReplicas: 1, MaxReplicas: 3,
		Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
	}}
	env.MustCreate(t, ng)
	return ng
}

func get(t *testing.T, obj client.Object, ns, name string) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestSatellitePerLocation: a tenant with pools on two Proxmox locations gets a
// satellite on each: a Cluster controlled by the tenant's, whose control plane mirrors
// the KamajiControlPlane and whose ProxmoxCluster reads the copy of that location's own
// credentials; its kubeconfig names the endpoint the location's workers use and is
// controlled by the control plane. A second pool on a location adds nothing; a resync
// writes nothing; Kamaji rotating the kubeconfig and a tenant version bump reach the
// satellites; deleting the last pool of a location deletes that satellite only.
func TestSatellitePerLocation(t *testing.T) {
	ns := tenant(t, true)
	pool(t, ns, "lab", "pve-lab")
	pool(t, ns, "lab-2", "pve-lab")
	rented := pool(t, ns, "rented", "pve-rented")

	tc := &clusterv1.Cluster{}
	get(t, tc, ns, cluster)
	for loc, token := range locations {
		name := names.SatelliteName(cluster, loc)
		sat := &clusterv1.Cluster{}
		testenv.Eventually(t, "the satellite Cluster on "+loc, func() bool { return get(t, sat, ns, name) })
		if !metav1.IsControlledBy(sat, tc) || sat.Spec.InfrastructureRef.Kind != "ProxmoxCluster" || sat.Spec.ControlPlaneRef.Kind != "SatelliteControlPlane" {
			t.Errorf("%s: satellite %+v, owners %v", loc, sat.Spec, sat.OwnerReferences)
		}
		scp := &cpv1.SatelliteControlPlane{}
		testenv.Eventually(t, "the satellite control plane's status on "+loc, func() bool {
			return get(t, scp, ns, name) && scp.Status.Initialization.ControlPlaneInitialized != nil && *scp.Status.Initialization.ControlPlaneInitialized
		})
		if scp.Spec.Version != "v1.35.4" || scp.Status.Version != "v1.35.4" || scp.Spec.ControlPlaneEndpoint.Host != cluster+"."+ns+"."+loc+".example.com" ||
			!metav1.IsControlledBy(scp, sat) {
			t.Errorf("%s: control plane %+v %+v, owners %v", loc, scp.Spec, scp.Status, scp.OwnerReferences)
		}
		infra := &capmox.ProxmoxCluster{}
		testenv.Eventually(t, "the ProxmoxCluster on "+loc, func() bool { return get(t, infra, ns, name) })
		if infra.Spec.CredentialsRef == nil || infra.Spec.CredentialsRef.Namespace != ns || !metav1.IsControlledBy(infra, sat) {
			t.Fatalf("%s: ProxmoxCluster %+v, owners %v", loc, infra.Spec, infra.OwnerReferences)
		}
		creds := &corev1.Secret{}
		testenv.Eventually(t, "the credentials copy of "+loc, func() bool { return get(t, creds, ns, infra.Spec.CredentialsRef.Name) })
		// No owner of the operator's: capmox's finalizer on the copy goes only with its
		// last owner.
		if infra.Spec.CredentialsRef.Name != names.SatelliteCredentialsName(cluster, loc) || string(creds.Data["secret"]) != token || len(creds.OwnerReferences) != 0 {
			t.Errorf("%s: credentials copy %s %q owned by %v, want the location's own token %q and no owner", loc, creds.Name, creds.Data["secret"], creds.OwnerReferences, token)
		}
		kc := &corev1.Secret{}
		testenv.Eventually(t, "the satellite's kubeconfig on "+loc, func() bool { return get(t, kc, ns, name+"-kubeconfig") })
		cfg, err := clientcmd.Load(kc.Data["value"])
		if err != nil {
			t.Fatal(err)
		}
		server := "https://" + cluster + "." + ns + "." + loc + ".example.com:443"
		if c := cfg.Clusters[cluster]; c == nil || c.Server != server ||
			kc.Type != clusterv1.ClusterSecretType || kc.Labels[clusterv1.ClusterNameLabel] != name || !metav1.IsControlledBy(kc, scp) {
			t.Errorf("%s: kubeconfig %s, type %s, labels %v, owners %v", loc, kc.Data["value"], kc.Type, kc.Labels, kc.OwnerReferences)
		}
	}

	// Steady: a reconcile that finds everything current writes nothing (a label on
	// the KamajiControlPlane, whose every change is watched, brings one).
	testenv.WaitQuiet(t, "the controller's writes", writes.Load)
	before, reconciled := writes.Load(), reconciles()
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kamaji.ControlPlaneGVK)
	get(t, kcp, ns, cluster)
	kcp.SetLabels(map[string]string{"example.com/touched": "yes"})
	if err := env.Client.Update(t.Context(), kcp); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a reconcile of the tenant", func() bool { return reconciles() > reconciled })
	testenv.WaitQuiet(t, "the controller's writes", writes.Load)
	if w := writes.Load() - before; w != 0 {
		t.Errorf("a reconcile of a tenant whose satellites are current sent %d writes", w)
	}

	// Kamaji rotates the admin kubeconfig: every satellite's follows.
	src := &corev1.Secret{}
	get(t, src, ns, cluster+"-kubeconfig")
	src.Data["value"] = kubeconfig(t, "admin-2")
	if err := env.Client.Update(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	for loc := range locations {
		kc := &corev1.Secret{}
		testenv.Eventually(t, "the rotated kubeconfig on "+loc, func() bool {
			return get(t, kc, ns, names.SatelliteName(cluster, loc)+"-kubeconfig") && strings.Contains(string(kc.Data["value"]), "admin-2")
		})
	}

	// The tenant upgrades: the desired version first, the current one once it is there.
	get(t, kcp, ns, cluster)
	set(t, kcp, "v1.36.0", "spec", "version")
	if err := env.Client.Update(t.Context(), kcp); err != nil {
		t.Fatal(err)
	}
	scp := &cpv1.SatelliteControlPlane{}
	testenv.Eventually(t, "the satellite's desired version", func() bool {
		return get(t, scp, ns, names.SatelliteName(cluster, "pve-lab")) && scp.Spec.Version == "v1.36.0"
	})
	if scp.Status.Version != "v1.35.4" {
		t.Errorf("the satellite reports version %q before the tenant's control plane does", scp.Status.Version)
	}
	get(t, kcp, ns, cluster)
	set(t, kcp, "v1.36.0", "status", "version")
	if err := env.Client.Status().Update(t.Context(), kcp); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the satellite's current version", func() bool {
		return get(t, scp, ns, names.SatelliteName(cluster, "pve-lab")) && scp.Status.Version == "v1.36.0"
	})

	// Someone deletes the satellite's kubeconfig and the credentials copy: both come
	// back.
	for _, name := range []string{names.SatelliteName(cluster, "pve-lab") + "-kubeconfig", names.SatelliteCredentialsName(cluster, "pve-lab")} {
		if err := env.Client.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, name+" made again", func() bool { return get(t, &corev1.Secret{}, ns, name) })
	}

	// The namespace stops being admitted: the satellites stay, untouched (deleting them
	// would delete the machines there), and no new one is made.
	nsObj := &corev1.Namespace{}
	get(t, nsObj, "", ns)
	delete(nsObj.Labels, admittedLabel)
	if err := env.Client.Update(t.Context(), nsObj); err != nil {
		t.Fatal(err)
	}
	testenv.WaitQuiet(t, "the controller's writes", writes.Load)
	for loc := range locations {
		if sat := (&clusterv1.Cluster{}); !get(t, sat, ns, names.SatelliteName(cluster, loc)) || !sat.DeletionTimestamp.IsZero() {
			t.Errorf("the satellite on %s went with the namespace's admission", loc)
		}
	}
	nsObj.Labels[admittedLabel] = "true"
	if err := env.Client.Update(t.Context(), nsObj); err != nil {
		t.Fatal(err)
	}

	// The pool on pve-rented moves to pve-lab: pve-rented's satellite goes (no pool
	// names it), with its credentials copy; pve-lab's stays.
	get(t, rented, ns, rented.Name)
	rented.Spec.LocationName = "pve-lab"
	if err := env.Client.Update(t.Context(), rented); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the satellite on pve-rented and its credentials copy deleted", func() bool {
		return !get(t, &clusterv1.Cluster{}, ns, names.SatelliteName(cluster, "pve-rented")) &&
			!get(t, &corev1.Secret{}, ns, names.SatelliteCredentialsName(cluster, "pve-rented"))
	})
	testenv.WaitQuiet(t, "the controller's writes", writes.Load)
	if !get(t, &clusterv1.Cluster{}, ns, names.SatelliteName(cluster, "pve-lab")) || !get(t, &corev1.Secret{}, ns, names.SatelliteCredentialsName(cluster, "pve-lab")) {
		t.Error("the satellite on pve-lab, or its credentials, went with the last pool on pve-rented")
	}
}

// TestNoSatelliteWhereNotAdmitted: a tenant whose namespace the Proxmox locations do not
// admit gets no satellite and never a copy of their credentials.
func TestNoSatelliteWhereNotAdmitted(t *testing.T) {
	ns := tenant(t, false)
	newLocation(t, "pve-admits", 22)
	pool(t, ns, "sneaky", "pve-admits")
	admitted := tenant(t, true)
	pool(t, admitted, "fine", "pve-admits")
	testenv.Eventually(t, "the admitted tenant's satellite", func() bool {
		return get(t, &clusterv1.Cluster{}, admitted, names.SatelliteName(cluster, "pve-admits"))
	})
	testenv.WaitQuiet(t, "the controller's writes", writes.Load)
	if get(t, &clusterv1.Cluster{}, ns, names.SatelliteName(cluster, "pve-admits")) {
		t.Error("a namespace the location does not admit got a satellite")
	}
	secrets := &corev1.SecretList{}
	if err := env.Client.List(t.Context(), secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		for _, v := range s.Data {
			if strings.Contains(string(v), "token-of-") {
				t.Errorf("Secret %s in the namespace the location does not admit holds a location's credentials", s.Name)
			}
		}
	}
}

// TestForeignSecretNotOverwritten: a Secret of the kubeconfig's name that the operator
// did not make is left as it is.
func TestForeignSecretNotOverwritten(t *testing.T) {
	ns := tenant(t, true)
	newLocation(t, "pve-foreign", 23)
	name := names.SatelliteName(cluster, "pve-foreign") + "-kubeconfig"
	env.MustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"value": []byte("mine")}})
	pool(t, ns, "lab", "pve-foreign")
	testenv.Eventually(t, "the satellite", func() bool {
		return get(t, &clusterv1.Cluster{}, ns, names.SatelliteName(cluster, "pve-foreign"))
	})
	// The rest of the satellite is made, and the refusal is reported.
	scp := &cpv1.SatelliteControlPlane{}
	testenv.Eventually(t, "the satellite's control plane mirrored", func() bool {
		return get(t, scp, ns, names.SatelliteName(cluster, "pve-foreign")) && scp.Status.Version == "v1.35.4"
	})
	testenv.Eventually(t, "a SatelliteFailed event naming the Secret", func() bool {
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == satellite.ReasonSatelliteFailed && strings.Contains(e.Note, name) && strings.Contains(e.Note, "not managed by") {
				return true
			}
		}
		return false
	})
	s := &corev1.Secret{}
	get(t, s, ns, name)
	if string(s.Data["value"]) != "mine" {
		t.Errorf("the tenant's own Secret %s was overwritten: %q", name, s.Data["value"])
	}
}

// reconciles is how many reconciles the controller finished.
func reconciles() float64 { return testenv.Reconciles((&satellite.Reconciler{}).Name()) }

// TestLocationServesOneTenantCluster: capmox gives every satellite on a location the
// location's whole address range, so a second tenant cluster gets no satellite there
// (nor a copy of its credentials) while the first's is there, and is told so without a
// word of the other tenant; it gets one once the first has left the location.
func TestLocationServesOneTenantCluster(t *testing.T) {
	newLocation(t, "pve-shared", 24)
	first := tenant(t, true)
	firstPool := pool(t, first, "a", "pve-shared")
	testenv.Eventually(t, "the first tenant's satellite", func() bool {
		return get(t, &clusterv1.Cluster{}, first, names.SatelliteName(cluster, "pve-shared"))
	})
	second := tenant(t, true)
	pool(t, second, "b", "pve-shared")
	var note string
	testenv.Eventually(t, "a SatelliteWaiting event on the second tenant's Cluster", func() bool {
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(second)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == satellite.ReasonSatelliteWaiting && strings.Contains(e.Note, "already serves another tenant cluster") {
				note = e.Note
				return true
			}
		}
		return false
	})
	if strings.Contains(note, first) {
		t.Errorf("the event tells the second tenant of the first: %q", note)
	}
	testenv.WaitQuiet(t, "the controller's writes", writes.Load)
	if get(t, &clusterv1.Cluster{}, second, names.SatelliteName(cluster, "pve-shared")) ||
		get(t, &corev1.Secret{}, second, names.SatelliteCredentialsName(cluster, "pve-shared")) {
		t.Fatal("the second tenant cluster got a satellite, or the credentials, on a location the first one's satellite is on")
	}
	// The first tenant leaves. Its satellite, being deleted, still holds the addresses
	// while Cluster API drains its machines (a finalizer here); once it is gone, the
	// second tenant's satellite is made.
	firstSat := &clusterv1.Cluster{}
	get(t, firstSat, first, names.SatelliteName(cluster, "pve-shared"))
	draining := client.MergeFrom(firstSat.DeepCopy())
	firstSat.Finalizers = append(firstSat.Finalizers, "test.nodegroup.io/draining")
	if err := env.Client.Patch(t.Context(), firstSat, draining); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), firstPool); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the first satellite being deleted", func() bool {
		return get(t, firstSat, first, firstSat.Name) && !firstSat.DeletionTimestamp.IsZero()
	})
	testenv.WaitQuiet(t, "the controller's writes", writes.Load)
	if get(t, &clusterv1.Cluster{}, second, names.SatelliteName(cluster, "pve-shared")) {
		t.Fatal("the second tenant got its satellite while the first one's still drains")
	}
	release := client.MergeFrom(firstSat.DeepCopy())
	firstSat.Finalizers = nil
	if err := env.Client.Patch(t.Context(), firstSat, release); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the first satellite gone and the second made", func() bool {
		return !get(t, &clusterv1.Cluster{}, first, names.SatelliteName(cluster, "pve-shared")) &&
			get(t, &clusterv1.Cluster{}, second, names.SatelliteName(cluster, "pve-shared"))
	})
}
