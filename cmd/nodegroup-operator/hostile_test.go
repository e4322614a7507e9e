package main_test

// What a hostile tenant tries, against the operator binary as the chart runs it (its
// webhook on, a limit of 3 pools per namespace set through the chart value), acting as
// a ServiceAccount bound in its own namespace to the chart's tenant roles only, so the
// API server's RBAC, the CRD's schema and CEL rules, and the webhook all answer as they
// would in a cluster. Every case states what the tenant gets, a refusal or data that
// stays data, and is followed by a check that nothing outside the tenant's namespace
// changed.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/inuse"
	"github.com/nodegroup-io/nodegroup-operator/internal/credentials"
	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

const (
	hostileNS  = "hostile-tenant"
	victimNS   = "hostile-victim"
	platformNS = "hostile-platform"
	// privateClass is a Kairos class with the platform's pull secret; victimsOnly is a
	// location that admits the victim's namespace only.
	privateClass = "hostile-private"
	victimsOnly  = "victims-only"
	// poolLimit is tenantLimits.poolsPerNamespace for this test.
	poolLimit = 3
	// drainFinalizer stands in for Cluster API's, which holds a MachineDeployment while
	// its machines drain (no Cluster API controller runs here).
	drainFinalizer = "test.nodegroup.io/draining"
)

// hostile is one string built to break every format a tenant string could reach: YAML
// (a line break, a document start, a flow mapping), JSON (a quote), a shell (command
// substitution, a semicolon), a systemd unit (a line that starts a new directive) and a
// Go template.
const hostile = "x\nExecStart=/bin/sh -c 'reboot'\n--- {a: 1}\"; $(reboot) `id` {{ .Values }}"

// hostileCase is one thing the tenant tries.
type hostileCase struct {
	name string
	// try does it with the tenant's client and returns what the API server answered.
	try func(t *testing.T, tenant client.Client) error
	// refused is a part of the refusal the tenant must get; empty when the request is
	// to be admitted.
	refused []string
	// then checks what an admitted request left: data that stays data.
	then func(t *testing.T, tenant client.Client)
}

func TestHostileTenants(t *testing.T) {
	port, err := localrun.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	rel := install(t, port, map[string]any{"tenantLimits": map[string]any{"poolsPerNamespace": poolLimit}})
	cmd, p := replica(t, rel, "nodegroup-operator-0", port)
	waitReady(t, cmd, p)
	hostilePlatform(t)
	tenant := tenantClient(t, hostileNS)

	var cases []hostileCase
	cases = append(cases, reachCases()...)
	cases = append(cases, stringCases()...)
	cases = append(cases, lengthCases()...)
	cases = append(cases, limitCase(), recreateCase(), deletingCase())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := outside(t, hostileNS)
			defer func() {
				clearPools(t)
				if diff := changed(before, outside(t, hostileNS)); len(diff) > 0 {
					t.Errorf("outside %s, what the tenant did changed:\n  %s", hostileNS, strings.Join(diff, "\n  "))
				}
			}()
			err := c.try(t, tenant)
			switch {
			case len(c.refused) == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case len(c.refused) > 0 && err == nil:
				t.Fatalf("admitted, want a refusal with %q", c.refused)
			case len(c.refused) > 0:
				for _, want := range c.refused {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("refused with %q, want it to say %q", err, want)
					}
				}
				t.Logf("the tenant gets: %v", err)
			}
			if c.then != nil {
				c.then(t, tenant)
			}
		})
	}
}

// hostilePlatform sets up what the platform has made: a namespace with a registry pull
// secret; a Kairos class that names it; a location for the victim's namespace only; the
// victim, a neighbour tenant with pools of its own (naming every class and location the
// tenant names, so their in-use finalizers are in place before the first snapshot) and
// a Cluster the tenant's namespace does not have; and the tenant's namespace with its
// Cluster.
func hostilePlatform(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	auth, _ := json.Marshal(map[string]any{"auths": map[string]any{"registry.example.com": map[string]string{"username": "robot", "password": "s3cret"}}})
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: "registry"},
			Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: auth}},
		&v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: privateClass}, Spec: v1.NodeGroupClassSpec{
			OS: v1.OSKairos,
			Image: &v1.ClassImage{KubernetesVersion: "v1.35.2",
				Reference: "registry.example.com/platform/kairos-worker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
			ImagePullSecretRef: &v1.SecretReference{Namespace: platformNS, Name: "registry"},
		}},
		&v1.Location{ObjectMeta: metav1.ObjectMeta{Name: victimsOnly}, Spec: v1.LocationSpec{
			Provider:          v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
			AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "victim"}},
		}},
	} {
		env.MustCreate(t, obj)
	}
	for ns, labels := range map[string]map[string]string{victimNS: {"tier": "victim"}, hostileNS: nil} {
		if err := testenv.CreateTenant(ctx, env.Client, ns, testenv.TenantOptions{Labels: labels, TalosSecret: true}); err != nil {
			t.Fatal(err)
		}
	}
	env.MustCreate(t, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: victimNS, Name: "private"}, Spec: clusterv1.ClusterSpec{
		ClusterNetwork: clusterv1.ClusterNetwork{Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/16"}}}}})
	web := pool(victimNS, "web", "talos")
	web.Spec.LocationName = victimsOnly
	kairos := pool(victimNS, "kairos", privateClass)
	for _, ng := range []*v1.NodeGroup{web, kairos, pool(victimNS, "talos", "talos")} {
		env.MustCreate(t, ng)
		waitRendered(t, env.Client, ng, metav1.ConditionTrue)
	}
	// The in-use controller has put its finalizer on everything the victim names.
	testenv.Eventually(t, "the in-use finalizers on the catalog the victim uses", func() bool {
		for _, obj := range []client.Object{&v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: privateClass}},
			&v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "talos"}},
			&v1.Location{ObjectMeta: metav1.ObjectMeta{Name: victimsOnly}}, &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: v1.BuiltinLocation}}} {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil || !slices.Contains(obj.GetFinalizers(), inuse.Finalizer) {
				return false
			}
		}
		return true
	})
	// The victim's pools have settled: their status and events are written.
	testenv.WaitQuiet(t, "the objects outside the tenant's namespace", func() string { return fmt.Sprint(outside(t, hostileNS)) })
}

// tenantClient is a client of a ServiceAccount of ns bound there, by RoleBindings, to
// the chart's tenant roles (what `edit` aggregates; no controller aggregates roles
// here), and cluster-wide to nothing but the chart's catalog reader (the chart binds
// it to every authenticated user).
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	env.MustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}})
	for _, role := range []string{"nodegroup-operator-tenant-edit", "nodegroup-operator-tenant-view"} {
		env.MustCreate(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}})
	}
	token, err := localrun.ServiceAccountToken(ctx, env.Config, ns, "tenant", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(&rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}, BearerToken: token},
		client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The bindings reach the authorizer's cache.
	testenv.Eventually(t, "the tenant's bindings in force", func() bool {
		return c.List(ctx, &v1.NodeGroupList{}, client.InNamespace(ns)) == nil
	})
	return c
}

// tenantPool is a pool of the tenant's namespace, changed by edit.
func tenantPool(name string, edit func(*v1.NodeGroup)) *v1.NodeGroup {
	ng := pool(hostileNS, name, "talos")
	if edit != nil {
		edit(ng)
	}
	return ng
}

func create(ng *v1.NodeGroup) func(*testing.T, client.Client) error {
	return func(_ *testing.T, c client.Client) error { return c.Create(context.Background(), ng) }
}

const forbidden = `User "system:serviceaccount:` + hostileNS + `:tenant" cannot`

// reachCases: the tenant reaches for what is another namespace's or the platform's.
func reachCases() []hostileCase {
	return []hostileCase{{
		name:    "a pool in another namespace",
		try:     create(pool(victimNS, "mine", "talos")),
		refused: []string{forbidden, `create resource "nodegroups"`, `in the namespace "` + victimNS + `"`},
	}, {
		name: "a location of its own",
		try: func(_ *testing.T, c client.Client) error {
			return c.Create(context.Background(), &v1.Location{ObjectMeta: metav1.ObjectMeta{Name: "mine"}, Spec: v1.LocationSpec{
				Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}}}})
		},
		refused: []string{forbidden, `create resource "locations"`},
	}, {
		name: "its namespace labelled as the victim's, to reach the victim's location",
		try: func(_ *testing.T, c client.Client) error {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostileNS}}
			return c.Patch(context.Background(), ns, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"victim"}}}`)))
		},
		refused: []string{forbidden, `patch resource "namespaces"`},
	}, {
		name:    "the victim's location",
		try:     create(tenantPool("far", func(ng *v1.NodeGroup) { ng.Spec.LocationName = victimsOnly })),
		refused: []string{`admission webhook "nodegroups.validate.nodegroup.io" denied the request`, "spec.locationName"},
	}, {
		name:    "a cluster named with another namespace",
		try:     create(tenantPool("other", func(ng *v1.NodeGroup) { ng.Spec.ClusterName = victimNS + "/tenant" })),
		refused: []string{"spec.clusterName", "should match"},
	}, {
		// Cluster names are looked up in the pool's own namespace only.
		name: "a cluster only the victim's namespace has",
		try:  create(tenantPool("private", func(ng *v1.NodeGroup) { ng.Spec.ClusterName = "private" })),
		then: func(t *testing.T, c client.Client) {
			ng := waitRendered(t, c, tenantPool("private", nil), metav1.ConditionFalse)
			cond := meta.FindStatusCondition(ng.Status.Conditions, v1.ConditionClusterFound)
			if cond == nil || cond.Reason != "ClusterNotFound" || !strings.Contains(cond.Message, `namespace "`+hostileNS+`"`) {
				t.Fatalf("ClusterFound: %+v, want ClusterNotFound in the tenant's namespace", cond)
			}
			if n := count(t, &clusterv1.MachineDeploymentList{}, hostileNS); n != 0 {
				t.Fatalf("%d MachineDeployments in the tenant's namespace, want none", n)
			}
		},
	}, {
		name: "a class whose pull secret is the platform's",
		try:  create(tenantPool("private-image", func(ng *v1.NodeGroup) { ng.Spec.NodeGroupClassName = privateClass })),
		then: func(t *testing.T, c client.Client) {
			ctx := context.Background()
			waitRendered(t, env.Client, tenantPool("private-image", nil), metav1.ConditionTrue)
			// The copy is in the tenant's namespace, owned by the pool; the tenant reads
			// neither it nor its source.
			copyKey := types.NamespacedName{Namespace: hostileNS, Name: credentials.PullSecretName(privateClass)}
			cp := &corev1.Secret{}
			if err := env.Client.Get(ctx, copyKey, cp); err != nil {
				t.Fatalf("the pull secret's copy: %v", err)
			}
			for _, key := range []types.NamespacedName{copyKey, {Namespace: platformNS, Name: "registry"}} {
				if err := c.Get(ctx, key, &corev1.Secret{}); !apierrors.IsForbidden(err) {
					t.Fatalf("the tenant reads the Secret %s: %v, want forbidden", key, err)
				}
			}
		},
	}}
}

// stringCases put the hostile string in every free-text field of a pool. The CRD
// refuses each with a message naming the field; what it admits stays data.
func stringCases() []hostileCase {
	set := func(name string, edit func(*v1.NodeGroup), field string) hostileCase {
		return hostileCase{name: name, try: create(tenantPool("strings", edit)), refused: []string{field}}
	}
	s := hostile
	str := intstr.FromString(s)
	cases := []hostileCase{
		set("metadata.name", func(ng *v1.NodeGroup) { ng.Name = s }, "metadata.name"),
		set("spec.clusterName", func(ng *v1.NodeGroup) { ng.Spec.ClusterName = s }, "spec.clusterName"),
		set("spec.nodeGroupClassName", func(ng *v1.NodeGroup) { ng.Spec.NodeGroupClassName = s }, "spec.nodeGroupClassName"),
		set("spec.locationName", func(ng *v1.NodeGroup) { ng.Spec.LocationName = s }, "spec.locationName"),
		set("spec.instanceType", func(ng *v1.NodeGroup) { ng.Spec.Resources, ng.Spec.InstanceType = nil, s }, "spec.instanceType"),
		set("spec.roles", func(ng *v1.NodeGroup) { ng.Spec.Roles = []string{s} }, "spec.roles[0]"),
		set("spec.labels key", func(ng *v1.NodeGroup) { ng.Spec.Labels = map[string]v1.LabelValue{s: "v"} }, "spec.labels keys must be valid label keys"),
		set("spec.labels value", func(ng *v1.NodeGroup) { ng.Spec.Labels = map[string]v1.LabelValue{"example.com/l": v1.LabelValue(s)} }, "spec.labels.example.com/l"),
		set("spec.taints key", func(ng *v1.NodeGroup) { ng.Spec.Taints = []v1.Taint{{Key: s, Effect: "NoSchedule"}} }, "spec.taints[].key"),
		set("spec.taints value", func(ng *v1.NodeGroup) { ng.Spec.Taints = []v1.Taint{{Key: "k", Value: s, Effect: "NoSchedule"}} }, "spec.taints[0].value"),
		set("spec.taints effect", func(ng *v1.NodeGroup) { ng.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffect(s)}} }, "spec.taints[0].effect"),
		set("spec.kubernetesVersion", func(ng *v1.NodeGroup) { ng.Spec.KubernetesVersion = s }, "spec.kubernetesVersion"),
		set("spec.osImage", func(ng *v1.NodeGroup) { ng.Spec.OSImage = s }, "spec.osImage"),
		set("spec.kernelModules", func(ng *v1.NodeGroup) { ng.Spec.KernelModules = []string{s} }, "spec.kernelModules[0]"),
		set("spec.gpus deviceName", func(ng *v1.NodeGroup) { ng.Spec.GPUs = []v1.GPU{{DeviceName: s}} }, "spec.gpus[0].deviceName"),
		set("spec.gpus resourceName", func(ng *v1.NodeGroup) { ng.Spec.GPUs = []v1.GPU{{DeviceName: "nvidia.com/A10", ResourceName: s}} }, "spec.gpus[0].resourceName"),
		set("spec.talos.sysctls key", func(ng *v1.NodeGroup) {
			ng.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{s: "1"}}
		}, "spec.talos.sysctls keys"),
		set("spec.talos.sysctls value", func(ng *v1.NodeGroup) {
			ng.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net.core.somaxconn": v1.SysctlValue(s)}}
		}, "spec.talos.sysctls values"),
		set("spec.autoscaling.scaleDownUtilizationThreshold", func(ng *v1.NodeGroup) {
			ng.Spec.Autoscaling = &v1.Autoscaling{ScaleDownUtilizationThreshold: s}
		}, "spec.autoscaling.scaleDownUtilizationThreshold"),
		set("spec.rollout.maxSurge", func(ng *v1.NodeGroup) { ng.Spec.Rollout = &v1.Rollout{MaxSurge: &str} }, "spec.rollout.maxSurge"),
		set("spec.rollout.maxUnavailable", func(ng *v1.NodeGroup) { ng.Spec.Rollout = &v1.Rollout{MaxUnavailable: &str} }, "spec.rollout.maxUnavailable"),
		set("spec.healthCheck.maxUnhealthy", func(ng *v1.NodeGroup) { ng.Spec.HealthCheck = &v1.HealthCheck{MaxUnhealthy: &str} }, "spec.healthCheck.maxUnhealthy"),
	}
	// Durations go as raw JSON: the Go type would not hold the string.
	for _, field := range []string{"healthCheck.nodeStartupTimeout", "healthCheck.unhealthyNotReadyTimeout", "healthCheck.unhealthyUnknownTimeout",
		"autoscaling.scaleDownUnneededTime", "autoscaling.maxNodeProvisionTime"} {
		cases = append(cases, hostileCase{name: "spec." + field, try: createRaw(field, s), refused: []string{"spec." + field}})
	}
	// What the CRD admits of the same alphabet stays data: annotations of the pool are
	// never rendered, and the sysctl value, label value and taint reach the Talos
	// config as YAML values Talos reads back exactly.
	sysctl := "1 2,3:/-_. x"
	cases = append(cases, hostileCase{
		name: "what is admitted stays data",
		try: create(tenantPool("data", func(ng *v1.NodeGroup) {
			ng.Annotations = map[string]string{"example.com/note": s}
			ng.Spec.Labels = map[string]v1.LabelValue{"example.com/l": "a.b_c-d"}
			ng.Spec.Taints = []v1.Taint{{Key: "example.com/t", Value: "a.b_c-d", Effect: "NoSchedule"}}
			ng.Spec.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"net.core.somaxconn": v1.SysctlValue(sysctl)}}
		})),
		then: func(t *testing.T, _ client.Client) {
			ng := waitRendered(t, env.Client, tenantPool("data", nil), metav1.ConditionTrue)
			data := talosConfig(t, ng)
			if strings.Contains(data, "ExecStart") || strings.Contains(data, "reboot") {
				t.Fatalf("the pool's annotation reached its Talos config:\n%s", data)
			}
			cfg, err := configloader.NewFromBytes([]byte(data))
			if err != nil {
				t.Fatalf("Talos refuses the rendered config: %v\n%s", err, data)
			}
			m := cfg.RawV1Alpha1().MachineConfig
			if got := m.MachineSysctls["net.core.somaxconn"]; got != sysctl {
				t.Errorf("the sysctl reads back as %q, want %q", got, sysctl)
			}
			if got := nodeLabels(t, data)["example.com/l"]; got != "a.b_c-d" {
				t.Errorf("the node label reads back as %q, want a.b_c-d", got)
			}
			for _, obj := range rendered(t, ng) {
				if strings.Contains(fmt.Sprint(obj.Object), "ExecStart") {
					t.Errorf("the pool's annotation reached %s %s", obj.GetKind(), obj.GetName())
				}
			}
		},
	})
	return cases
}

// createRaw creates a pool with field (a dotted path under spec) set to value, as JSON.
func createRaw(field, value string) func(*testing.T, client.Client) error {
	return func(t *testing.T, c client.Client) error {
		u := toUnstructured(t, tenantPool("strings", nil))
		if err := unstructured.SetNestedField(u.Object, value, append([]string{"spec"}, strings.Split(field, ".")...)...); err != nil {
			t.Fatal(err)
		}
		return c.Create(context.Background(), u)
	}
}

// lengthCases name things at every length limit, and one past it.
func lengthCases() []hostileCase {
	long := func(n int) string {
		// Dots every 60 characters keep a DNS subdomain's labels short enough.
		b := []byte(strings.Repeat("a", n))
		for i := 60; i < n-1; i += 61 {
			b[i] = '.'
		}
		return string(b)
	}
	label := strings.Repeat("v", 63)
	return []hostileCase{{
		name: "a pool name of 253 characters",
		try: create(tenantPool(long(253), func(ng *v1.NodeGroup) {
			ng.Spec.Labels = map[string]v1.LabelValue{"example.com/l": v1.LabelValue(label)}
			ng.Spec.Taints = []v1.Taint{{Key: long(253) + "/" + strings.Repeat("n", 63), Value: label, Effect: "NoSchedule"}}
		})),
		then: func(t *testing.T, _ client.Client) {
			ng := waitRendered(t, env.Client, tenantPool(long(253), nil), metav1.ConditionTrue)
			for _, obj := range rendered(t, ng) {
				limit := 63
				if obj.GetKind() == "MachineDeployment" {
					limit = 50 // its machines' names, and so hostnames, add 12
				}
				if len(obj.GetName()) > limit {
					t.Errorf("%s %s: %d characters, more than %d", obj.GetKind(), obj.GetName(), len(obj.GetName()), limit)
				}
			}
			if got := nodeLabels(t, talosConfig(t, ng))["example.com/l"]; got != label {
				t.Errorf("the 63-character label reads back as %q", got)
			}
		},
	}, {
		name:    "a pool name of 254 characters",
		try:     create(tenantPool(long(254), nil)),
		refused: []string{"metadata.name", "must be no more than 253"},
	}, {
		name:    "a cluster name of 64 characters",
		try:     create(tenantPool("long", func(ng *v1.NodeGroup) { ng.Spec.ClusterName = strings.Repeat("c", 64) })),
		refused: []string{"spec.clusterName", "Too long"},
	}, {
		name: "a label value of 64 characters",
		try: create(tenantPool("long", func(ng *v1.NodeGroup) {
			ng.Spec.Labels = map[string]v1.LabelValue{"example.com/l": v1.LabelValue(label + "v")}
		})),
		refused: []string{"spec.labels", "Too long"},
	}, {
		name: "33 labels",
		try: create(tenantPool("long", func(ng *v1.NodeGroup) {
			ng.Spec.Labels = map[string]v1.LabelValue{}
			for i := range 33 {
				ng.Spec.Labels[fmt.Sprintf("example.com/l%d", i)] = "v"
			}
		})),
		refused: []string{"spec.labels", "must have at most 32 items"},
	}, {
		name: "17 taints",
		try: create(tenantPool("long", func(ng *v1.NodeGroup) {
			for i := range 17 {
				ng.Spec.Taints = append(ng.Spec.Taints, v1.Taint{Key: fmt.Sprintf("t%d", i), Effect: "NoSchedule"})
			}
		})),
		refused: []string{"spec.taints", "must have at most 16 items"},
	}}
}

// limitCase: the tenant creates pools up to the platform's limit, and one more.
func limitCase() hostileCase {
	return hostileCase{
		name: "more pools than the platform's limit",
		try: func(t *testing.T, c client.Client) error {
			for i := range poolLimit {
				ng := tenantPool(fmt.Sprintf("p%d", i), nil)
				if err := c.Create(context.Background(), ng); err != nil {
					t.Fatalf("pool %d of %d: %v", i+1, poolLimit, err)
				}
				// The operator's cache, which the webhook counts in, has it.
				testenv.Eventually(t, "the operator sees the pool", func() bool {
					return c.Get(context.Background(), client.ObjectKeyFromObject(ng), ng) == nil && len(ng.Finalizers) > 0
				})
			}
			return c.Create(context.Background(), tenantPool("one-more", nil))
		},
		refused: []string{fmt.Sprintf(`namespace %q holds %d NodeGroups, the platform's limit is %d per namespace`, hostileNS, poolLimit, poolLimit)},
		then: func(t *testing.T, c client.Client) {
			// Pools under the limit still change.
			ng := tenantPool("p0", nil)
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(ng), ng); err != nil {
				t.Fatal(err)
			}
			ng.Spec.MaxReplicas = 5
			if err := c.Update(context.Background(), ng); err != nil {
				t.Fatalf("an update of a pool in a namespace at its limit: %v", err)
			}
		},
	}
}

// recreateCase: the tenant deletes a pool and creates it again under the same name
// while its old MachineDeployment still drains its machines, first as the API server
// lets it, then after stripping the old pool's finalizer. The new pool never adopts or
// deletes what the old one left; once the old MachineDeployment and what it owned are
// gone, the new pool renders its own.
func recreateCase() hostileCase {
	return hostileCase{
		name: "a pool deleted and recreated while its machines drain",
		try: func(t *testing.T, c client.Client) error {
			ctx := context.Background()
			old := tenantPool("again", nil)
			if err := c.Create(ctx, old); err != nil {
				t.Fatal(err)
			}
			old = waitRendered(t, env.Client, old, metav1.ConditionTrue)
			md := &clusterv1.MachineDeployment{}
			mdKey := types.NamespacedName{Namespace: hostileNS, Name: old.Status.MachineDeploymentName}
			if err := env.Client.Get(ctx, mdKey, md); err != nil {
				t.Fatal(err)
			}
			md.Finalizers = append(md.Finalizers, drainFinalizer)
			if err := env.Client.Update(ctx, md); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, old); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "the operator deletes the MachineDeployment", func() bool {
				return env.Client.Get(ctx, mdKey, md) == nil && md.DeletionTimestamp != nil
			})
			// The old pool waits for its machines: its name is taken.
			err := c.Create(ctx, tenantPool("again", nil))
			if !apierrors.IsAlreadyExists(err) || !strings.Contains(err.Error(), "is being deleted") {
				t.Fatalf("a pool created under the name of one being deleted: %v, want AlreadyExists, being deleted", err)
			}
			t.Logf("while the old pool waits, the tenant gets: %v", err)

			// The tenant may strip the finalizer of its own pool, and create it again.
			if err := c.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
				t.Fatalf("the tenant strips its pool's finalizer: %v", err)
			}
			testenv.Eventually(t, "the old pool gone", func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(old), &v1.NodeGroup{}))
			})
			oldObjects := rendered(t, old)
			again := tenantPool("again", nil)
			if err := c.Create(ctx, again); err != nil {
				t.Fatalf("the pool created again once the old one is gone: %v", err)
			}
			again = waitRendered(t, env.Client, again, metav1.ConditionFalse)
			cond := meta.FindStatusCondition(again.Status.Conditions, v1.ConditionRendered)
			if cond.Reason != "ApplyFailed" || !strings.Contains(cond.Message, string(old.UID)) {
				t.Fatalf("the new pool's Rendered: %s %q, want ApplyFailed naming the old pool's UID %s", cond.Reason, cond.Message, old.UID)
			}
			t.Logf("the new pool, while the old MachineDeployment drains, says: %s", cond.Message)
			// Nothing the old pool owned was adopted, changed or deleted.
			for _, o := range oldObjects {
				now := &unstructured.Unstructured{}
				now.SetGroupVersionKind(o.GroupVersionKind())
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&o), now); err != nil {
					t.Fatalf("%s %s of the old pool: %v", o.GetKind(), o.GetName(), err)
				}
				if now.GetResourceVersion() != o.GetResourceVersion() {
					t.Errorf("%s %s of the old pool was written while the new pool waited", o.GetKind(), o.GetName())
				}
			}

			// The drain ends; the garbage collector (which does not run here) deletes
			// what the old pool owned, and the new pool renders its own.
			if err := env.Client.Get(ctx, mdKey, md); err != nil {
				t.Fatal(err)
			}
			md.Finalizers = slices.DeleteFunc(md.Finalizers, func(f string) bool { return f == drainFinalizer })
			if err := env.Client.Update(ctx, md); err != nil {
				t.Fatal(err)
			}
			for _, o := range oldObjects {
				if err := env.Client.Delete(ctx, &o); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
			}
			again = waitRendered(t, env.Client, again, metav1.ConditionTrue)
			for _, o := range rendered(t, again) {
				refs := o.GetOwnerReferences()
				if len(refs) != 1 || refs[0].UID != again.UID {
					t.Errorf("%s %s is owned by %v, want the new pool %s alone", o.GetKind(), o.GetName(), refs, again.UID)
				}
			}
			return nil
		},
	}
}

// deletingCase: the webhook does not see updates of a pool being deleted (the chart's
// matchConditions), so a tenant holding its pool there with a finalizer of its own
// could change the spec past the webhook. The CRD still refuses what the operator could
// not read: a spec it cannot decode would stop its cache of every namespace's pools.
func deletingCase() hostileCase {
	const hold = "example.com/hold"
	ng := tenantPool("held", func(ng *v1.NodeGroup) { ng.Finalizers = []string{hold} })
	return hostileCase{
		name: "a spec changed past the webhook while its pool is deleted",
		try: func(t *testing.T, c client.Client) error {
			ctx := context.Background()
			if err := c.Create(ctx, ng); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, ng); err != nil {
				t.Fatal(err)
			}
			patch := fmt.Sprintf(`{"spec":{"healthCheck":{"nodeStartupTimeout":%q}}}`, hostile)
			return c.Patch(ctx, ng, client.RawPatch(types.MergePatchType, []byte(patch)))
		},
		refused: []string{"spec.healthCheck.nodeStartupTimeout must be a duration"},
		then: func(t *testing.T, c client.Client) {
			err := c.Patch(context.Background(), ng, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			if client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		},
	}
}

// waitRendered waits until ng's Rendered condition has status for its generation, and
// returns the pool as c read it then.
func waitRendered(t *testing.T, c client.Client, ng *v1.NodeGroup, status metav1.ConditionStatus) *v1.NodeGroup {
	t.Helper()
	got := &v1.NodeGroup{}
	testenv.Eventually(t, fmt.Sprintf("pool %s Rendered=%s", ng.Name, status), func() bool {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ng), got); err != nil {
			return false
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionRendered)
		return cond != nil && cond.Status == status && got.Status.ObservedGeneration == got.Generation
	})
	return got
}

// talosConfig is the machine config of ng's current Talos bootstrap template.
func talosConfig(t *testing.T, ng *v1.NodeGroup) string {
	t.Helper()
	tct := &talos.TalosConfigTemplate{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ng.Namespace, Name: ng.Status.BootstrapTemplateName}, tct); err != nil {
		t.Fatal(err)
	}
	return tct.Spec.Template.Spec.Data
}

// nodeLabels are the labels a Talos machine config has the kubelet register, as Talos
// loads the config (which it must) and the kubelet reads its --node-labels flag.
func nodeLabels(t *testing.T, data string) map[string]string {
	t.Helper()
	cfg, err := configloader.NewFromBytes([]byte(data))
	if err != nil {
		t.Fatalf("Talos refuses the rendered config: %v\n%s", err, data)
	}
	out := map[string]string{}
	flag := cfg.RawV1Alpha1().MachineConfig.MachineKubelet.KubeletExtraArgs["node-labels"]
	for kv := range strings.SplitSeq(flag, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// rendered are the objects the operator made for ng: its MachineDeployment, health
// check and templates, found by the pool label.
func rendered(t *testing.T, ng *v1.NodeGroup) []unstructured.Unstructured {
	t.Helper()
	kinds := append([]schema.GroupVersionKind{
		clusterv1.GroupVersion.WithKind("MachineDeployment"), clusterv1.GroupVersion.WithKind("MachineHealthCheck"),
	}, names.TemplateKinds...)
	var out []unstructured.Unstructured
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := env.Client.List(context.Background(), list, client.InNamespace(ng.Namespace), client.MatchingLabels{names.LabelPool: names.LabelValue(ng.Name)}); err != nil {
			t.Fatal(err)
		}
		out = append(out, list.Items...)
	}
	if len(out) < 4 {
		t.Fatalf("%d objects rendered for pool %s, want a MachineDeployment, a health check and two templates", len(out), ng.Name)
	}
	return out
}

func count(t *testing.T, list client.ObjectList, ns string) int {
	t.Helper()
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return meta.LenList(list)
}

func toUnstructured(t *testing.T, ng *v1.NodeGroup) *unstructured.Unstructured {
	t.Helper()
	ng.SetGroupVersionKind(v1.GroupVersion.WithKind("NodeGroup"))
	raw, err := json.Marshal(ng)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// clearPools deletes the tenant's pools and waits until the operator has let them go.
func clearPools(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.DeleteAllOf(ctx, &v1.NodeGroup{}, client.InNamespace(hostileNS)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the tenant's pools deleted", func() bool { return count(t, &v1.NodeGroupList{}, hostileNS) == 0 })
}

// snapshotKinds are the kinds whose objects outside the tenant's namespace must not
// change: what the operator reads or writes, and what RBAC and admission are made of.
var snapshotKinds = append([]schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("Namespace"),
	corev1.SchemeGroupVersion.WithKind("Secret"),
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
	corev1.SchemeGroupVersion.WithKind("Service"),
	corev1.SchemeGroupVersion.WithKind("Event"),
	rbacv1.SchemeGroupVersion.WithKind("Role"),
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
	rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"),
	admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"),
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	v1.GroupVersion.WithKind("NodeGroup"),
	v1.GroupVersion.WithKind("NodeGroupClass"),
	v1.GroupVersion.WithKind("Location"),
	clusterv1.GroupVersion.WithKind("Cluster"),
	clusterv1.GroupVersion.WithKind("MachineDeployment"),
	clusterv1.GroupVersion.WithKind("MachineHealthCheck"),
	clusterv1.GroupVersion.WithKind("MachineSet"),
	clusterv1.GroupVersion.WithKind("Machine"),
	{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha2", Kind: "KamajiControlPlane"},
}, names.TemplateKinds...)

// outside is every object of snapshotKinds outside namespace ns (the Namespace ns
// itself included), each as its JSON without resourceVersion and managedFields. The
// status of classes and locations is left out: their InUse condition counts the pools
// of every namespace by design, and names none.
func outside(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gvk := range snapshotKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := env.Client.List(context.Background(), list); err != nil {
			t.Fatalf("listing %s: %v", gvk.Kind, err)
		}
		for _, obj := range list.Items {
			if obj.GetNamespace() == ns {
				continue
			}
			obj.SetResourceVersion("")
			obj.SetManagedFields(nil)
			if gvk.Group == v1.GroupVersion.Group && gvk.Kind != "NodeGroup" {
				delete(obj.Object, "status")
			}
			raw, err := json.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())] = string(raw)
		}
	}
	return out
}

// changed lists what differs between two snapshots.
func changed(before, after map[string]string) []string {
	var diff []string
	for _, key := range slices.Sorted(maps.Keys(before)) {
		switch now, ok := after[key]; {
		case !ok:
			diff = append(diff, "deleted: "+key)
		case now != before[key]:
			diff = append(diff, fmt.Sprintf("changed: %s\n    before %s\n    after  %s", key, before[key], now))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[key]; !ok {
			diff = append(diff, "created: "+key)
		}
	}
	return diff
}
