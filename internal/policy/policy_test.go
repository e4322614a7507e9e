package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

var (
	talosClass  = v1.NodeGroupClassSpec{OS: v1.OSTalos}
	kairosClass = v1.NodeGroupClassSpec{OS: v1.OSKairos}
	// customKairos is a platform's own Kairos class with a pinned image.
	customKairos = v1.NodeGroupClassSpec{OS: v1.OSKairos, Image: &v1.ClassImage{
		Reference:         "registry.example/kairos@sha256:" + strings.Repeat("a", 64),
		KubernetesVersion: "v1.35.4",
	}}
)

func pool() *v1.NodeGroup {
	return &v1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "tenant-a"},
		Spec: v1.NodeGroupSpec{
			ClusterName:        "tenant-a",
			NodeGroupClassName: "talos",
			LocationName:       "in-cluster",
			MinReplicas:        1,
			MaxReplicas:        3,
			Resources:          &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
			EphemeralStorage:   resource.MustParse("20Gi"),
			Roles:              []string{"worker"},
			Labels:             map[string]v1.LabelValue{"example.com/team": "a"},
		},
	}
}

func location(sel *metav1.LabelSelector) *v1.LocationSpec {
	return &v1.LocationSpec{
		Provider:          v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
		AllowedNamespaces: sel,
	}
}

// input is a Talos pool on an open location whose control plane runs v1.35.4.
func input(edit ...func(*Input)) Input {
	class := talosClass
	in := Input{
		Object:              pool(),
		Class:               &class,
		Location:            location(&metav1.LabelSelector{}),
		NamespaceLabels:     map[string]string{"kubernetes.io/metadata.name": "tenant-a", "tier": "gold"},
		ControlPlaneVersion: "v1.35.4",
	}
	for _, e := range edit {
		e(&in)
	}
	return in
}

// moved is an update of a pool from one class to another.
func moved(from, to v1.NodeGroupClassSpec, mdExists bool) func(*Input) {
	return func(in *Input) {
		in.OldObject = in.Object.DeepCopy()
		in.OldClass = &from
		in.Class = &to
		in.Object.Spec.NodeGroupClassName = "new-class"
		in.MachineDeploymentExists = mdExists
	}
}

func spec(edit func(*v1.NodeGroupSpec)) func(*Input) {
	return func(in *Input) { edit(&in.Object.Spec) }
}

func classOf(c v1.NodeGroupClassSpec) func(*Input) {
	return func(in *Input) { in.Class = &c }
}

func selector(sel *metav1.LabelSelector) func(*Input) {
	return func(in *Input) { in.Location = location(sel) }
}

func req(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func builtin(t *testing.T, name string) Rule {
	t.Helper()
	for _, r := range BuiltinRules() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no built-in rule %q", name)
	return Rule{}
}

// check evaluates in and asserts that exactly the named built-in rules are broken, each
// with its own field and message.
func check(t *testing.T, in Input, want ...string) {
	t.Helper()
	got, err := Evaluate(context.Background(), in)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	var names []string
	for _, v := range got {
		names = append(names, v.Rule)
		r := builtin(t, v.Rule)
		if v.Field != r.Field || v.Message != r.Message {
			t.Errorf("violation %s = {%s: %s}, want {%s: %s}", v.Rule, v.Field, v.Message, r.Field, r.Message)
		}
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("broken rules = %v, want %v (violations: %v)", names, want, got)
	}
}

func TestBuiltinRules(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		want []string
	}{
		{name: "typical Talos pool", in: input()},
		{name: "typical Kairos pool", in: input(classOf(kairosClass))},

		// os-switch
		{name: "Talos to Kairos with machines", in: input(moved(talosClass, kairosClass, true)), want: []string{"os-switch"}},
		{name: "Kairos to Talos with machines", in: input(moved(kairosClass, talosClass, true)), want: []string{"os-switch"}},
		{name: "Talos to custom Kairos with machines", in: input(moved(talosClass, customKairos, true),
			spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "" })), want: []string{"os-switch"}},
		{name: "Talos to Kairos without a MachineDeployment", in: input(moved(talosClass, kairosClass, false))},
		{name: "Kairos to Talos without a MachineDeployment", in: input(moved(kairosClass, talosClass, false))},
		{name: "Talos to another Talos class with machines", in: input(moved(talosClass, v1.NodeGroupClassSpec{OS: v1.OSTalos, Talos: &v1.TalosClassSpec{}}, true))},
		{name: "create on Kairos while a MachineDeployment exists", in: input(classOf(kairosClass), func(in *Input) { in.MachineDeploymentExists = true })},
		{name: "reconciler: live Talos machines, class now Kairos", in: input(classOf(kairosClass), func(in *Input) {
			in.OldClass = &v1.NodeGroupClassSpec{OS: v1.OSTalos}
			in.MachineDeploymentExists = true
		}), want: []string{"os-switch"}},

		// machine-cluster
		{name: "running pool stays under its Cluster", in: input(func(in *Input) {
			in.MachineDeploymentExists, in.MachineCluster, in.Cluster = true, "tenant", "tenant"
		})},
		{name: "running KubeVirt pool moved to a Proxmox location", in: input(func(in *Input) {
			in.MachineDeploymentExists, in.MachineCluster, in.Cluster = true, "tenant", "tenant-pve-1a2b3c4d"
		}), want: []string{"machine-cluster"}},
		{name: "running Proxmox pool moved back", in: input(func(in *Input) {
			in.MachineDeploymentExists, in.MachineCluster, in.Cluster = true, "tenant-pve-1a2b3c4d", "tenant"
		}), want: []string{"machine-cluster"}},
		{name: "pool without machines moved to a Proxmox location", in: input(func(in *Input) { in.Cluster = "tenant-pve-1a2b3c4d" })},

		// talos-only-fields
		{name: "Talos class takes every Talos-only field", in: input(spec(func(s *v1.NodeGroupSpec) {
			s.OSImage = "factory.talos.dev/installer/abc:v1.11.0"
			s.KernelModules = []string{"nvidia"}
			s.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10", Count: 1}}
			s.Talos = &v1.NodeGroupTalos{Sysctls: map[string]v1.SysctlValue{"vm.nr_hugepages": "1024"}}
		}))},
		{name: "custom Kairos class, osImage", in: input(classOf(customKairos), spec(func(s *v1.NodeGroupSpec) { s.OSImage = "registry.example/os:v1" })), want: []string{"talos-only-fields"}},
		{name: "custom Kairos class, kernelModules", in: input(classOf(customKairos), spec(func(s *v1.NodeGroupSpec) { s.KernelModules = []string{"nvidia"} })), want: []string{"talos-only-fields"}},
		{name: "custom Kairos class, gpus", in: input(classOf(customKairos), spec(func(s *v1.NodeGroupSpec) {
			s.GPUs = []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10"}}
		})), want: []string{"talos-only-fields"}},
		{name: "custom Kairos class, empty talos block", in: input(classOf(customKairos), spec(func(s *v1.NodeGroupSpec) { s.Talos = &v1.NodeGroupTalos{} })), want: []string{"talos-only-fields"}},
		{name: "built-in Kairos class, kernelModules", in: input(classOf(kairosClass), spec(func(s *v1.NodeGroupSpec) { s.KernelModules = []string{"nvidia"} })), want: []string{"talos-only-fields"}},
		{name: "Kairos class, empty kernelModules list", in: input(classOf(kairosClass), spec(func(s *v1.NodeGroupSpec) { s.KernelModules = []string{} }))},

		// location-access
		{name: "location without allowedNamespaces", in: input(selector(nil)), want: []string{"location-access"}},
		{name: "location admitting all", in: input(selector(&metav1.LabelSelector{}))},
		{name: "matchLabels match", in: input(selector(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold", "kubernetes.io/metadata.name": "tenant-a"}}))},
		{name: "matchLabels other value", in: input(selector(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "silver"}})), want: []string{"location-access"}},
		{name: "matchLabels missing label", in: input(selector(&metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}})), want: []string{"location-access"}},
		{name: "matchLabels, namespace without labels", in: input(selector(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}),
			func(in *Input) { in.NamespaceLabels = nil }), want: []string{"location-access"}},
		{name: "In match", in: input(selector(req("tier", metav1.LabelSelectorOpIn, "silver", "gold")))},
		{name: "In other value", in: input(selector(req("tier", metav1.LabelSelectorOpIn, "silver"))), want: []string{"location-access"}},
		{name: "In missing label", in: input(selector(req("region", metav1.LabelSelectorOpIn, "eu"))), want: []string{"location-access"}},
		{name: "NotIn other value", in: input(selector(req("tier", metav1.LabelSelectorOpNotIn, "silver")))},
		{name: "NotIn missing label", in: input(selector(req("region", metav1.LabelSelectorOpNotIn, "eu")))},
		{name: "NotIn listed value", in: input(selector(req("tier", metav1.LabelSelectorOpNotIn, "gold"))), want: []string{"location-access"}},
		{name: "Exists present", in: input(selector(req("tier", metav1.LabelSelectorOpExists)))},
		{name: "Exists absent", in: input(selector(req("region", metav1.LabelSelectorOpExists))), want: []string{"location-access"}},
		{name: "DoesNotExist absent", in: input(selector(req("region", metav1.LabelSelectorOpDoesNotExist)))},
		{name: "DoesNotExist present", in: input(selector(req("tier", metav1.LabelSelectorOpDoesNotExist))), want: []string{"location-access"}},
		{name: "unknown operator", in: input(selector(req("tier", "Gt", "1"))), want: []string{"location-access"}},
		{name: "matchLabels and matchExpressions both hold", in: input(selector(&metav1.LabelSelector{
			MatchLabels:      map[string]string{"tier": "gold"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpDoesNotExist}},
		}))},
		{name: "matchLabels holds, matchExpressions does not", in: input(selector(&metav1.LabelSelector{
			MatchLabels:      map[string]string{"tier": "gold"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"gold"}}},
		})), want: []string{"location-access"}},

		// version
		{name: "pool at the control plane's minor, newer patch", in: input(spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.35.9" }))},
		{name: "pool a minor behind", in: input(spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.34" }))},
		{name: "pool a minor ahead", in: input(spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.36" })), want: []string{"version"}},
		{name: "pool a major ahead", in: input(spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v2.0.0" })), want: []string{"version"}},
		{name: "pool ahead of a control plane reported without v", in: input(spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.36.0" }),
			func(in *Input) { in.ControlPlaneVersion = "1.35.4" }), want: []string{"version"}},
		{name: "minor compared as a number", in: input(spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.100" }),
			func(in *Input) { in.ControlPlaneVersion = "v1.99.0" }), want: []string{"version"}},
		{name: "control plane version unknown", in: input(spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.36" }),
			func(in *Input) { in.ControlPlaneVersion = "" })},
		{name: "pool follows the control plane", in: input(spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "" }))},
		{name: "class image at the control plane's minor", in: input(classOf(customKairos))},
		{name: "class image ahead of the control plane", in: input(classOf(customKairos), spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "" }),
			func(in *Input) { in.ControlPlaneVersion = "v1.34.2" }), want: []string{"version"}},
		{name: "class image fixes the minor, same minor other patch", in: input(classOf(customKairos), spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.35.1" }))},
		{name: "class image fixes the minor, pool asks another", in: input(classOf(customKairos), spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.34" })),
			want: []string{"class-version"}},
		{name: "class image fixes the minor, pool asks a newer one", in: input(classOf(customKairos), spec(func(s *v1.NodeGroupSpec) { s.KubernetesVersion = "v1.36" }),
			func(in *Input) { in.ControlPlaneVersion = "v1.36.0" }), want: []string{"class-version"}},

		// several at once, in rule order
		{name: "everything wrong", in: input(moved(talosClass, customKairos, true), selector(nil), spec(func(s *v1.NodeGroupSpec) {
			s.KubernetesVersion = "v1.34"
			s.OSImage = "registry.example/os:v1"
		}), func(in *Input) { in.ControlPlaneVersion = "v1.33.0" }),
			want: []string{"os-switch", "talos-only-fields", "location-access", "version", "class-version"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.in, tc.want...) })
	}
}

// TestLocationAccessIsLabelSelector pins the CEL rule to metav1.LabelSelector's own
// semantics (metav1.LabelSelectorAsSelector) over every operator and label set.
func TestLocationAccessIsLabelSelector(t *testing.T) {
	selectors := []*metav1.LabelSelector{
		nil, {},
		{MatchLabels: map[string]string{"tier": "gold"}},
		{MatchLabels: map[string]string{"tier": "gold", "region": "eu"}},
		req("tier", metav1.LabelSelectorOpIn, "gold", "silver"),
		req("tier", metav1.LabelSelectorOpNotIn, "gold"),
		req("tier", metav1.LabelSelectorOpExists),
		req("tier", metav1.LabelSelectorOpDoesNotExist),
		{MatchLabels: map[string]string{"region": "eu"}, MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold"}},
			{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
		}},
	}
	namespaces := []map[string]string{
		nil, {"tier": "gold"}, {"tier": "silver"}, {"tier": "gold", "region": "eu"},
		{"tier": "gold", "region": "eu", "legacy": ""}, {"region": "eu"},
	}
	for i, sel := range selectors {
		for _, ns := range namespaces {
			want := false
			if sel != nil {
				s, err := metav1.LabelSelectorAsSelector(sel)
				if err != nil {
					t.Fatal(err)
				}
				want = s.Matches(labels.Set(ns))
			}
			got, err := Evaluate(context.Background(), input(selector(sel), func(in *Input) { in.NamespaceLabels = ns }))
			if err != nil {
				t.Fatal(err)
			}
			if admitted := len(got) == 0; admitted != want {
				t.Errorf("selector %d %v, namespace labels %v: admitted %v, metav1 says %v (%v)", i, sel, ns, admitted, want, got)
			}
			if admits, err := LocationAdmits(context.Background(), location(sel), ns); err != nil || admits != want {
				t.Errorf("selector %d %v, namespace labels %v: LocationAdmits %v (%v), metav1 says %v", i, sel, ns, admits, err, want)
			}
		}
	}
}

func withRulesList(rules ...string) (out []v1.PoolRule) {
	for i, r := range rules {
		out = append(out, v1.PoolRule{Rule: r, Message: fmt.Sprintf("message %d", i)})
	}
	return out
}

func withRules(rules ...string) func(*Input) {
	return func(in *Input) {
		c := *in.Class
		for i, r := range rules {
			c.PoolRules = append(c.PoolRules, v1.PoolRule{Rule: r, Message: fmt.Sprintf("message %d", i)})
		}
		in.Class = &c
	}
}

func TestPoolRules(t *testing.T) {
	instanceType := spec(func(s *v1.NodeGroupSpec) { s.Resources, s.InstanceType = nil, "u1.small" })
	cases := []struct {
		name string
		in   Input
		// want maps poolRules[i] to a part of its message.
		want map[string]string
	}{
		{name: "maxReplicas within", in: input(withRules(`object.spec.maxReplicas <= 10`))},
		{name: "maxReplicas over", in: input(withRules(`object.spec.maxReplicas <= 10`), spec(func(s *v1.NodeGroupSpec) { s.MaxReplicas = 20 })),
			want: map[string]string{"poolRules[0]": "message 0"}},
		{name: "instanceType listed", in: input(withRules(`object.spec.instanceType in ['u1.medium', 'u1.large']`),
			spec(func(s *v1.NodeGroupSpec) { s.Resources, s.InstanceType = nil, "u1.large" }))},
		{name: "instanceType not listed", in: input(withRules(`object.spec.instanceType in ['u1.medium', 'u1.large']`), instanceType),
			want: map[string]string{"poolRules[0]": "message 0"}},
		{name: "has resources", in: input(withRules(`has(object.spec.resources)`))},
		{name: "has no resources", in: input(withRules(`has(object.spec.resources)`), instanceType),
			want: map[string]string{"poolRules[0]": "message 0"}},
		{name: "quantities are strings", in: input(withRules(`object.spec.resources.memory == '4Gi'`, `object.spec.ephemeralStorage.endsWith('Gi')`))},
		{name: "optional field", in: input(withRules(`object.spec.?resources.cpu.orValue('1') != '1'`), instanceType),
			want: map[string]string{"poolRules[0]": "message 0"}},
		{name: "only the broken rules", in: input(withRules(`object.spec.maxReplicas <= 10`, `object.spec.roles.all(r, r != 'worker')`, `object.spec.labels.exists(k, k.startsWith('example.com/'))`)),
			want: map[string]string{"poolRules[1]": "message 1"}},
		{name: "oldObject null on create", in: input(withRules(`oldObject == null || object.spec.maxReplicas >= oldObject.spec.maxReplicas`))},
		{name: "oldObject on update", in: input(withRules(`oldObject == null || object.spec.maxReplicas >= oldObject.spec.maxReplicas`), func(in *Input) {
			in.OldObject = in.Object.DeepCopy()
			in.Object.Spec.MaxReplicas = 2
		}), want: map[string]string{"poolRules[0]": "message 0"}},
		{name: "runtime error refuses", in: input(withRules(`object.spec.resources.cpu == '2'`), instanceType),
			want: map[string]string{"poolRules[0]": "could not be evaluated (no such key: resources)"}},
		{name: "a class rule that does not compile refuses", in: input(withRules(`object.spec.maxReplicas <=`)),
			want: map[string]string{"poolRules[0]": "invalid spec.poolRules[0]"}},
		{name: "built-in and class rules together", in: input(withRules(`object.spec.maxReplicas <= 1`), selector(nil)),
			want: map[string]string{"location-access": "does not admit", "poolRules[0]": "message 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Evaluate(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("violations = %v, want %v", got, tc.want)
			}
			for _, v := range got {
				if part, ok := tc.want[v.Rule]; !ok || !strings.Contains(v.Message, part) {
					t.Errorf("violation %s: %q, want it to contain %q", v.Rule, v.Message, part)
				}
			}
		})
	}
}

func TestCompileClassRules(t *testing.T) {
	rules := func(texts ...string) []v1.PoolRule {
		var out []v1.PoolRule
		for _, r := range texts {
			out = append(out, v1.PoolRule{Rule: r, Message: "m"})
		}
		return out
	}
	// Ten nested loops over ten items: 10^10 iterations.
	ten := "[0,1,2,3,4,5,6,7,8,9]"
	nested := "true"
	for i := range 10 {
		nested = fmt.Sprintf("%s.all(x%d, %s)", ten, i, nested)
	}
	cases := []struct {
		name  string
		rules []v1.PoolRule
		want  string // part of the error; empty for none
	}{
		{name: "none", rules: nil},
		{name: "valid rules", rules: rules(`object.spec.maxReplicas <= 10`, `object.spec.instanceType in ['u1.medium','u1.large']`,
			`has(object.spec.resources)`, `object.spec.labels.all(k, object.spec.labels.all(j, k == j || k.size() + j.size() < 600))`,
			`oldObject == null || oldObject.spec.clusterName == object.spec.clusterName`)},
		{name: "syntax error", rules: rules(`object.spec.maxReplicas <=`), want: "spec.poolRules[0].rule: the rule does not compile"},
		{name: "not bool", rules: rules(`object.spec.maxReplicas <= 10`, `object.spec.maxReplicas`), want: "spec.poolRules[1].rule: the rule returns dyn, not bool"},
		{name: "string result", rules: rules(`'yes'`), want: "returns string, not bool"},
		{name: "Kubernetes CEL library is not here", rules: rules(`quantity(object.spec.resources.memory).isGreaterThan(quantity('4Gi'))`), want: "undeclared reference to 'quantity'"},
		{name: "only the pool is in scope", rules: rules(`class.os == 'Talos'`), want: "undeclared reference to 'class'"},
		{name: "expensive by estimate", rules: rules(nested), want: "worst-case cost"},
		{name: "nested loops over pool fields", rules: rules(`object.metadata.annotations.all(a, object.metadata.labels.all(b, object.spec.labels.all(c, a + b + c != '')))`), want: "worst-case cost"},
		{name: "too long", rules: rules(strings.Repeat("true && ", 128) + "true"), want: "more than 1024"},
		{name: "regex too large", rules: rules(`object.metadata.name.matches('(a{1000}){1000}')`), want: "does not compile"},
		{name: "too many rules", rules: rules(strings.Split(strings.Repeat("true,", MaxPoolRules+1), ",")[:MaxPoolRules+1]...), want: "more than 16"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CompileClassRules(tc.rules)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CompileClassRules: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CompileClassRules = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// annotated is a pool with n annotations, each value size characters long: more than the
// size hints assume, which a tenant may do; only the runtime bounds then stop a rule that
// walks them.
func annotated(n, size int) func(*Input) {
	return func(in *Input) {
		in.Object.Annotations = map[string]string{}
		for i := range n {
			in.Object.Annotations[fmt.Sprintf("example.com/a%d", i)] = strings.Repeat("v", size)
		}
	}
}

func ruleNames(vs []Violation) []string {
	var names []string
	for _, v := range vs {
		names = append(names, v.Rule)
	}
	return names
}

// A rule within the estimate (256 annotations of 256 characters assumed) over a pool
// with bigger ones is stopped by the runtime cost limit and refuses the pool; two such
// rules spend the budget of the evaluation and the rest do not run.
func TestRuntimeCostLimit(t *testing.T) {
	rule := `object.metadata.annotations.all(a, !object.metadata.annotations[a].contains('x'))`
	if err := CompileClassRules(withRulesList(rule)); err != nil {
		t.Fatalf("the rule should pass the estimate: %v", err)
	}
	big := annotated(200, 10_000)
	if got, err := Evaluate(context.Background(), input(annotated(200, 10), withRules(rule))); err != nil || len(got) > 0 {
		t.Fatalf("with small annotations: %v, %v", got, err)
	}
	got, err := Evaluate(context.Background(), input(big, withRules(rule)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Rule != "poolRules[0]" || !strings.Contains(got[0].Message, "actual cost limit exceeded") {
		t.Fatalf("violations = %v, want poolRules[0] stopped by the cost limit", got)
	}

	got, err = Evaluate(context.Background(), input(big, withRules(rule, rule+" && true", rule+" || false", "true")))
	if err != nil {
		t.Fatal(err)
	}
	if names, want := ruleNames(got), []string{"poolRules[0]", "poolRules[1]", "cost-budget"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("violations = %v, want %v", got, want)
	}
	if !strings.Contains(got[2].Message, "before poolRules[2] ran") {
		t.Errorf("budget message = %q", got[2].Message)
	}
}

// A loop still running at EvaluationTimeout is interrupted and refuses the pool.
func TestEvaluationTimeout(t *testing.T) {
	defer func(d time.Duration) { evaluationTimeout = d }(evaluationTimeout)
	evaluationTimeout = time.Nanosecond
	got, err := Evaluate(context.Background(), input(annotated(1000, 1), withRules(`object.metadata.annotations.all(a, a.size() > 0)`)))
	if err != nil {
		t.Fatal(err)
	}
	if names := ruleNames(got); !reflect.DeepEqual(names, []string{"timeout"}) || !strings.Contains(got[0].Message, "poolRules[0] was running") {
		t.Fatalf("violations = %v, want a timeout in poolRules[0]", got)
	}
}

// The caller's context ending is an error, not a violation: the pool is not at fault.
func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Evaluate(ctx, input(annotated(1000, 1), withRules(`object.metadata.annotations.all(a, a.size() > 0)`)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Evaluate with a cancelled context = %v, want context.Canceled", err)
	}
}

// Programs and the rule cache are shared by every request the webhook serves at once.
func TestConcurrentEvaluate(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				rule := fmt.Sprintf("object.spec.maxReplicas <= %d", (g*50+i)%7)
				got, err := Evaluate(context.Background(), input(withRules(rule)))
				if err != nil || (len(got) == 1) != ((g*50+i)%7 < 3) {
					t.Errorf("rule %q: %v, %v", rule, got, err)
				}
			}
		})
	}
	wg.Wait()
}

func TestMissingInput(t *testing.T) {
	for _, edit := range []func(*Input){
		func(in *Input) { in.Object = nil },
		func(in *Input) { in.Class = nil },
		func(in *Input) { in.Location = nil },
	} {
		if _, err := Evaluate(context.Background(), input(edit)); err == nil {
			t.Errorf("Evaluate without a required input succeeded")
		}
	}
}

// FuzzEvaluate throws random pools and random rules at CompileClassRules and Evaluate:
// neither may panic, Evaluate must not fail, and each call returns within a second.
func FuzzEvaluate(f *testing.F) {
	f.Add("object.spec.maxReplicas <= 10", int32(3), "u1.medium", "v1.35", "v1.35.4", "tier", "gold", uint16(0), true, true)
	f.Add("object.spec.instanceType in ['u1.medium','u1.large']", int32(0), "", "v1.36.0", "1.35", "", "", uint16(10), false, false)
	f.Add("has(object.spec.resources)", int32(1000), "x", "garbage", "v", "a/b", "", uint16(300), true, false)
	f.Add(`object.metadata.annotations.all(a, object.metadata.annotations.all(b, a.size() + b.size() > 0))`, int32(5), "", "", "", "k", "v", uint16(2000), false, true)
	f.Add(`object.metadata.annotations.all(a, a.size() > 0)`, int32(5), "", "", "", "k", "v", uint16(4000), false, true)
	f.Add(`object.spec.labels.exists(k, k.matches(object.spec.instanceType))`, int32(2), "(a+)+$", "v99999999999.1", "v1.1", "x", "y", uint16(1), true, true)
	f.Add(`cel.bind(a, object.metadata.name + object.metadata.name, cel.bind(b, a + a, cel.bind(c, b + b, c.size() > 0)))`, int32(1), "", "", "", "", "", uint16(0), false, false)
	f.Add(`object.metadata.name.replace('', object.metadata.name).replace('', object.metadata.name).size() > 0`, int32(1), "", "", "", "", "", uint16(0), false, false)
	f.Add(`object.spec.labels.map(k, object.metadata.annotations.map(a, a + k)).size() > 0`, int32(1), "", "", "", "k", "", uint16(4000), false, false)
	f.Add(`object.spec.kubernetesVersion.split('.').map(s, int(s)).all(i, i > 0)`, int32(1), "", "v1.2.3", "", "", "", uint16(0), false, false)
	f.Fuzz(func(t *testing.T, rule string, maxReplicas int32, instanceType, version, cpVersion, labelKey, labelValue string, annotations uint16, kairos, mdExists bool) {
		in := input(func(in *Input) {
			s := &in.Object.Spec
			s.MaxReplicas = maxReplicas
			s.InstanceType = instanceType
			s.KubernetesVersion = version
			s.Labels = map[string]v1.LabelValue{labelKey: v1.LabelValue(labelValue)}
			s.OSImage = labelValue
			in.ControlPlaneVersion = cpVersion
			in.NamespaceLabels = map[string]string{labelKey: labelValue}
			in.Location = location(&metav1.LabelSelector{MatchLabels: map[string]string{labelKey: labelValue}})
			in.MachineDeploymentExists = mdExists
			if kairos {
				in.Class = &v1.NodeGroupClassSpec{OS: v1.OSKairos, Image: &v1.ClassImage{KubernetesVersion: version}}
				in.OldClass = &talosClass
				in.OldObject = pool()
			}
		}, annotated(int(annotations%4096), 8))
		in.Class.PoolRules = []v1.PoolRule{{Rule: rule, Message: "m"}}

		within(t, time.Second, "CompileClassRules of "+strconv.Quote(rule), func() { _ = CompileClassRules(in.Class.PoolRules) })
		within(t, time.Second, "Evaluate with rule "+strconv.Quote(rule), func() {
			if _, err := Evaluate(context.Background(), in); err != nil {
				t.Errorf("Evaluate: %v", err)
			}
		})
	})
}

// FuzzCompileClassRules throws classes of random rules at CompileClassRules: it may not
// panic and returns within a second; a rule is refused, by its index, exactly when it is
// refused alone; a class of more than MaxPoolRules rules is refused; and a class it
// accepts is never called invalid when a pool is judged by it.
func FuzzCompileClassRules(f *testing.F) {
	f.Add("object.spec.maxReplicas <= 10", "has(object.spec.resources)", uint8(2))
	f.Add("object.spec.maxReplicas", "object.spec.labels.all(k, k.size() < 10)", uint8(3))
	f.Add(`quantity(object.spec.resources.memory).isGreaterThan(quantity('4Gi'))`, "oldObject == null || oldObject.spec.clusterName == object.spec.clusterName", uint8(17))
	f.Add(`object.metadata.annotations.all(a, object.metadata.annotations.all(b, a != b))`, "1 +", uint8(1))
	f.Add(`object.spec.taints.exists(t, t.key.matches('^[a-z]+$'))`, `[1,2,3].map(x, [1,2,3].map(y, x * y)).size() > 0`, uint8(5))
	f.Fuzz(func(t *testing.T, a, b string, n uint8) {
		count := int(n) % (MaxPoolRules + 3)
		rules := make([]v1.PoolRule, count)
		for i := range rules {
			rules[i] = v1.PoolRule{Rule: a, Message: "m"}
			if i%2 == 1 {
				rules[i].Rule = b
			}
		}
		var err error
		within(t, time.Second, "CompileClassRules", func() { err = CompileClassRules(rules) })
		if count > MaxPoolRules {
			if err == nil {
				t.Fatalf("a class of %d rules was accepted", count)
			}
			return
		}
		for i, r := range rules {
			alone := CompileClassRules([]v1.PoolRule{r}) != nil
			named := err != nil && strings.Contains(err.Error(), fmt.Sprintf("spec.poolRules[%d].rule: ", i))
			if alone != named {
				t.Fatalf("rule %d %q: refused alone %v, named in the class's error %v: %v", i, r.Rule, alone, named, err)
			}
		}
		if err != nil {
			return
		}
		within(t, time.Second, "Evaluate", func() {
			got, err := Evaluate(context.Background(), input(func(in *Input) { in.Class.PoolRules = rules }))
			if err != nil {
				t.Errorf("Evaluate: %v", err)
			}
			for _, v := range got {
				if strings.Contains(v.Message, "invalid spec.poolRules") {
					t.Errorf("an accepted class is called invalid: %v", v)
				}
			}
		})
	})
}

// within fails the test when f does not return within d, even if it never returns.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		if took := time.Since(start); took > d {
			t.Fatalf("%s took %v", what, took)
		}
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	in := input(withRules(`object.spec.maxReplicas <= 10`, `has(object.spec.resources)`), func(in *Input) {
		in.OldObject = in.Object.DeepCopy()
		in.OldClass = &talosClass
		in.MachineDeploymentExists = true
		in.Location = location(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}})
	})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if v, err := Evaluate(ctx, in); err != nil || len(v) > 0 {
			b.Fatal(v, err)
		}
	}
}
