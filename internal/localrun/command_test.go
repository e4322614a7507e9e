package localrun

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// loopback are the values every suite passes: the operator's certificate is valid for
// the loopback URL.
func loopback(more map[string]any) map[string]any {
	v := map[string]any{"webhook": map[string]any{"extraDNSNames": []any{LoopbackHost}}}
	for k, x := range more {
		if k == "webhook" {
			maps.Copy(v["webhook"].(map[string]any), x.(map[string]any))
			continue
		}
		v[k] = x
	}
	return v
}

func render(t *testing.T, values map[string]any) *Release {
	t.Helper()
	r, err := Render(testenv.RepoRoot(), values)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// flags splits --name=value arguments into a map, failing on a repeated name.
func flags(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			t.Fatalf("argument %q is not --name=value", a)
		}
		if _, dup := m[name]; dup {
			t.Fatalf("--%s twice in %v", name, args)
		}
		m[name] = value
	}
	return m
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return m
}

// TestCommandIsTheChartsDeployment renders the real chart with several suites' values
// and checks that the local command line is the Deployment's, with only the listen
// addresses, the kubeconfig and the folders changed, and its env resolved as a kubelet
// resolves it.
func TestCommandIsTheChartsDeployment(t *testing.T) {
	t.Setenv("GOGC", "400")
	t.Setenv("GOMEMLIMIT", "1GiB")
	t.Setenv("KUBECONFIG", "/nowhere")
	cases := []struct {
		name   string
		values map[string]any
		// changed are the flags whose value differs from the rendered one; want are
		// values the local command must have.
		changed []string
		want    map[string]string
		// Where the command listens (empty: off).
		metrics, pprof bool
		webhook        bool
		memory         string
	}{
		{
			name:    "defaults",
			values:  loopback(nil),
			changed: []string{"health-probe-bind-address", "metrics-bind-address", "webhook-port"},
			want:    map[string]string{"webhook-manage-certs": "true", "leader-elect": "true", "sync-period": "10h"},
			metrics: true, webhook: true, memory: "536870912",
		},
		{
			name: "scale benchmark",
			values: loopback(map[string]any{
				"concurrency": 7, "syncPeriod": "1m0s", "pprof": map[string]any{"enabled": true},
				"resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}},
			}),
			changed: []string{"health-probe-bind-address", "metrics-bind-address", "webhook-port", "pprof-bind-address"},
			want:    map[string]string{"concurrency": "7", "sync-period": "1m0s"},
			metrics: true, pprof: true, webhook: true, memory: "1073741824",
		},
		{
			name:    "metrics off, one replica without leader election",
			values:  loopback(map[string]any{"metrics": map[string]any{"enabled": false}, "replicaCount": 1, "leaderElection": map[string]any{"enabled": false}}),
			changed: []string{"health-probe-bind-address", "webhook-port"},
			want:    map[string]string{"metrics-bind-address": "0", "leader-elect": "false"},
			webhook: true, memory: "536870912",
		},
		{
			name:    "cert-manager",
			values:  map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": true}}},
			changed: []string{"health-probe-bind-address", "metrics-bind-address", "webhook-port", "webhook-cert-dir"},
			want:    map[string]string{"webhook-manage-certs": "false"},
			metrics: true, webhook: true, memory: "536870912",
		},
		{
			name:    "webhook off",
			values:  map[string]any{"webhook": map[string]any{"enabled": false}},
			changed: []string{"health-probe-bind-address", "metrics-bind-address"},
			want:    map[string]string{"enable-webhook": "false"},
			metrics: true, memory: "536870912",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.values)
			deploy, err := r.Deployment()
			if err != nil {
				t.Fatal(err)
			}
			rendered := flags(t, operatorArgs(deploy))
			dir := t.TempDir()
			local := Local{Kubeconfig: "/k/operator.kubeconfig", PodName: "nodegroup-operator-3", Dir: dir,
				Health: "127.0.0.1:18081", Metrics: "127.0.0.1:18443", WebhookPort: 19443}
			cmd, err := r.Command(local)
			if err != nil {
				t.Fatal(err)
			}
			got := flags(t, cmd.Args)

			// Every rendered flag is passed, changed only where a Pod's address or
			// path is; the kubeconfig is added.
			for name, v := range rendered {
				g, ok := got[name]
				switch {
				case !ok:
					t.Errorf("--%s=%s rendered but not passed", name, v)
				case slices.Contains(tc.changed, name) == (g == v):
					t.Errorf("--%s: rendered %q, passed %q; changed should be %v", name, v, g, tc.changed)
				}
			}
			added := []string{"kubeconfig"}
			for name := range got {
				if _, ok := rendered[name]; !ok && !slices.Contains(added, name) {
					t.Errorf("--%s=%s passed but not rendered", name, got[name])
				}
			}
			for name, v := range tc.want {
				if got[name] != v {
					t.Errorf("--%s=%q, want %q", name, got[name], v)
				}
			}
			if got["kubeconfig"] != local.Kubeconfig {
				t.Errorf("--kubeconfig=%q", got["kubeconfig"])
			}

			// Where it listens.
			if got["health-probe-bind-address"] != local.Health || cmd.ReadyURL() != "http://127.0.0.1:18081/readyz" {
				t.Errorf("health %q, ready URL %q", got["health-probe-bind-address"], cmd.ReadyURL())
			}
			if (cmd.Metrics != "") != tc.metrics || tc.metrics && got["metrics-bind-address"] != local.Metrics {
				t.Errorf("metrics at %q (--metrics-bind-address=%s), want on: %t", cmd.Metrics, got["metrics-bind-address"], tc.metrics)
			}
			if (cmd.Pprof != "") != tc.pprof || tc.pprof && (got["pprof-bind-address"] != cmd.Pprof || !strings.HasPrefix(cmd.Pprof, "127.0.0.1:")) {
				t.Errorf("pprof at %q (--pprof-bind-address=%s), want on: %t", cmd.Pprof, got["pprof-bind-address"], tc.pprof)
			}
			if (cmd.WebhookPort != 0) != tc.webhook || tc.webhook && got["webhook-port"] != "19443" {
				t.Errorf("webhook port %d (--webhook-port=%s), want on: %t", cmd.WebhookPort, got["webhook-port"], tc.webhook)
			}
			if d, ok := got["webhook-cert-dir"]; ok && d != filepath.Join(dir, "webhook-certs") {
				t.Errorf("--webhook-cert-dir=%s, want under %s", d, dir)
			}

			// The env: the Downward API resolved, the parent's Go runtime settings and
			// kubeconfig not inherited.
			env := envMap(cmd.Env)
			want := map[string]string{
				"POD_NAMESPACE": ReleaseNamespace, "POD_NAME": local.PodName,
				"CONTAINER_MEMORY_LIMIT": tc.memory, "TMPDIR": filepath.Join(dir, "tmp"),
			}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("env %s=%q, want %q", k, env[k], v)
				}
			}
			for _, k := range []string{"GOGC", "GOMEMLIMIT", "KUBECONFIG"} {
				if v, ok := env[k]; ok {
					t.Errorf("env %s=%s leaked from the test process", k, v)
				}
			}
			for _, e := range deploy.Spec.Template.Spec.Containers[0].Env {
				if _, ok := env[e.Name]; !ok {
					t.Errorf("env %s rendered but not set", e.Name)
				}
			}
		})
	}
}

// TestCommandFreeAddresses: an empty address gets a free loopback port of its own.
func TestCommandFreeAddresses(t *testing.T) {
	cmd, err := render(t, loopback(map[string]any{"pprof": map[string]any{"enabled": true}})).Command(Local{Kubeconfig: "k", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range []string{cmd.Health, cmd.Metrics, cmd.Pprof} {
		if !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
			t.Errorf("address %q: a loopback address of its own expected (%v)", a, cmd)
		}
		seen[a] = true
	}
	if cmd.WebhookPort == 0 {
		t.Error("no webhook port picked")
	}
	if env := envMap(cmd.Env); env["POD_NAME"] != ReleaseName+"-0" {
		t.Errorf("POD_NAME=%q, want the first replica's name", env["POD_NAME"])
	}
}

// TestCommandRefusesWhatItDoesNotKnow: a chart change that a local run would carry
// wrongly fails instead.
func TestCommandRefusesWhatItDoesNotKnow(t *testing.T) {
	for name, change := range map[string]func(*corev1.Container){
		"unknown flag":        func(c *corev1.Container) { c.Args = append(c.Args, "--new-flag=1") },
		"flag without value":  func(c *corev1.Container) { c.Args = append(c.Args, "--leader-elect") },
		"positional argument": func(c *corev1.Container) { c.Args = append(c.Args, "run") },
		"kubeconfig rendered": func(c *corev1.Container) { c.Args = append(c.Args, "--kubeconfig=/etc/kubeconfig") },
		"flag twice":          func(c *corev1.Container) { c.Args = append(c.Args, c.Args[0]) },
		"command":             func(c *corev1.Container) { c.Command = []string{"/manager"} },
		"envFrom":             func(c *corev1.Container) { c.EnvFrom = []corev1.EnvFromSource{{}} },
		"secret env": func(c *corev1.Container) {
			c.Env[0].ValueFrom = &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{}}
		},
		"other field":          func(c *corev1.Container) { c.Env[0].ValueFrom.FieldRef.FieldPath = "spec.nodeName" },
		"cpu limit":            func(c *corev1.Container) { c.Env = append(c.Env, resourceEnv("CPU", "limits.cpu")) },
		"another container":    func(c *corev1.Container) { c.Env = append(c.Env, resourceEnvOf("MEM", "limits.memory", "sidecar")) },
		"$(VAR) reference":     func(c *corev1.Container) { c.Env = append(c.Env, corev1.EnvVar{Name: "X", Value: "$(POD_NAME)"}) },
		"no health probe flag": func(c *corev1.Container) { c.Args = slices.DeleteFunc(c.Args, isHealthFlag) },
	} {
		t.Run(name, func(t *testing.T) {
			deploy, err := render(t, loopback(nil)).Deployment()
			if err != nil {
				t.Fatal(err)
			}
			change(&deploy.Spec.Template.Spec.Containers[0])
			if cmd, err := LocalCommand(deploy, Local{Kubeconfig: "k", Dir: t.TempDir()}); err == nil {
				t.Errorf("accepted: %v %v", cmd.Args, cmd.Env)
			} else {
				t.Log(err)
			}
		})
	}
}

func isHealthFlag(a string) bool { return strings.HasPrefix(a, "--health-probe-bind-address=") }

func resourceEnv(name, resource string) corev1.EnvVar { return resourceEnvOf(name, resource, "") }

func resourceEnvOf(name, resource, container string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: resource, ContainerName: container},
	}}
}

// TestMemoryLimitDivisorAndNoLimit: the Downward API's divisor rounds up; without a
// limit the node's (this machine's) memory is given.
func TestMemoryLimitDivisorAndNoLimit(t *testing.T) {
	deploy, err := render(t, loopback(map[string]any{"resources": map[string]any{"limits": nil}})).Deployment()
	if err != nil {
		t.Fatal(err)
	}
	ctr := &deploy.Spec.Template.Spec.Containers[0]
	if _, ok := ctr.Resources.Limits[corev1.ResourceMemory]; ok {
		t.Fatalf("limits %v: the values did not remove the memory limit", ctr.Resources.Limits)
	}
	cmd, err := LocalCommand(deploy, Local{Kubeconfig: "k", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := machineMemory()
	if err != nil || machine <= 0 {
		t.Fatalf("machine memory %d: %v", machine, err)
	}
	if got := envMap(cmd.Env)["CONTAINER_MEMORY_LIMIT"]; got == "" || got == "0" {
		t.Errorf("CONTAINER_MEMORY_LIMIT=%q without a limit, want the machine's %d", got, machine)
	}

	deploy, err = render(t, loopback(map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1500Ki"}}})).Deployment()
	if err != nil {
		t.Fatal(err)
	}
	ctr = &deploy.Spec.Template.Spec.Containers[0]
	env := resourceEnv("MEM_MI", "limits.memory")
	env.ValueFrom.ResourceFieldRef.Divisor.Set(1 << 20)
	ctr.Env = append(ctr.Env, env)
	cmd, err = LocalCommand(deploy, Local{Kubeconfig: "k", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := envMap(cmd.Env)["MEM_MI"]; got != "2" {
		t.Errorf("1500Ki in Mi = %q, want 2 (rounded up)", got)
	}
}

// TestLocalObjects: every object but the Deployment, the webhooks on the loopback URL
// without a caBundle; refused when the certificate would not name the loopback host.
func TestLocalObjects(t *testing.T) {
	r := render(t, loopback(nil))
	objs, err := r.LocalObjects(19443)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(r.CRDs)+len(r.Objects)-1 {
		t.Errorf("%d objects of %d rendered, want all but the Deployment", len(objs), len(r.CRDs)+len(r.Objects))
	}
	// The CRDs come from their own chart, first, and are kept on uninstall.
	if len(r.CRDs) != 4 {
		t.Fatalf("%d CRDs rendered, want NodeGroup, NodeGroupClass, Location and SatelliteControlPlane", len(r.CRDs))
	}
	for i, crd := range r.CRDs {
		if objs[i] != crd || crd.GetKind() != "CustomResourceDefinition" || crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("object %d: %s %s %v, want the CRD chart's CRDs first, kept on uninstall", i, objs[i].GetKind(), objs[i].GetName(), objs[i].GetAnnotations())
		}
	}
	for _, o := range r.Objects {
		if o.GetKind() == "CustomResourceDefinition" {
			t.Errorf("the operator's release holds CRD %s: crds.enabled is false for a local run", o.GetName())
		}
	}
	var hooks []any
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			t.Error("the Deployment is applied")
		case "ValidatingWebhookConfiguration":
			hooks, _, _ = unstructured.NestedSlice(o.Object, "webhooks")
		}
	}
	if len(hooks) == 0 {
		t.Fatal("no webhooks")
	}
	for _, h := range hooks {
		cc, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig")
		url, _ := cc["url"].(string)
		if len(cc) != 1 || !strings.HasPrefix(url, "https://localhost:19443/validate-") {
			t.Errorf("clientConfig %v, want only a url https://localhost:19443/validate-...", cc)
		}
	}
	// The rendered objects themselves are left as rendered.
	for _, o := range r.Objects {
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			if _, ok, _ := unstructured.NestedMap(hooks[0].(map[string]any), "clientConfig", "service"); !ok {
				t.Error("LocalObjects changed the release's own objects")
			}
		}
	}

	if _, err := render(t, nil).LocalObjects(19443); err == nil || !strings.Contains(err.Error(), "extraDNSNames") {
		t.Errorf("without webhook.extraDNSNames: %v, want a refusal naming the value", err)
	}
}
