package chart

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook"
)

// operatorFlags is the operator binary's command line: a FlagSet with the flags
// cmd/nodegroup-operator/main.go defines (read from its source, with their types) and
// the zap logging flags it binds.
func operatorFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	fs := flag.NewFlagSet("nodegroup-operator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := filepath.Join(testenv.RepoRoot(), "cmd", "nodegroup-operator", "main.go")
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "flag" {
			return true
		}
		lit, ok := call.Args[1].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		name, _ := strconv.Unquote(lit.Value)
		switch sel.Sel.Name {
		case "StringVar":
			fs.String(name, "", "")
		case "BoolVar":
			fs.Bool(name, false, "")
		case "IntVar":
			fs.Int(name, 0, "")
		case "DurationVar":
			fs.Duration(name, 0, "")
		default:
			t.Errorf("main.go defines flag %s with flag.%s: teach this test its type", name, sel.Sel.Name)
		}
		return true
	})
	opts := zap.Options{}
	opts.BindFlags(fs)
	return fs
}

// TestDeploymentArgsParseAsOperatorFlags parses the Deployment's arguments with the
// operator's own flags, so a renamed or removed flag, or a value of the wrong type (a
// bad log level too), fails here instead of crash-looping the pods.
func TestDeploymentArgsParseAsOperatorFlags(t *testing.T) {
	fs := operatorFlags(t)
	for _, name := range []string{"leader-elect", "webhook-manage-certs", "webhook-dns-names", "zap-log-level"} {
		if fs.Lookup(name) == nil {
			t.Fatalf("flag --%s not found in main.go: the source reading is broken", name)
		}
	}
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			deploy := find(t, objects(t, render(t, parseValues(t, tc.values))), "Deployment", "nodegroup-operator")
			containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			run := operatorFlags(t)
			if err := run.Parse(args); err != nil {
				t.Fatalf("the operator would refuse its arguments: %v\n%s", err, strings.Join(args, "\n"))
			}
			if run.NArg() != 0 {
				t.Errorf("arguments the operator ignores: %v", run.Args())
			}
			env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			fromDownwardAPI := map[string]string{}
			for _, e := range env {
				e := e.(map[string]any)
				field, _, _ := unstructured.NestedString(e, "valueFrom", "fieldRef", "fieldPath")
				resource, _, _ := unstructured.NestedString(e, "valueFrom", "resourceFieldRef", "resource")
				fromDownwardAPI[e["name"].(string)] = field + resource
			}
			// The operator reads these by name (main.go): its namespace, its replica's
			// name (the webhook certificate reports), and its memory limit in bytes for
			// the Go runtime (the default divisor, 1, gives bytes).
			for name, want := range map[string]string{
				"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name", "CONTAINER_MEMORY_LIMIT": "limits.memory",
			} {
				if fromDownwardAPI[name] != want {
					t.Errorf("env %v: %s from the downward API's %s expected", env, name, want)
				}
			}
		})
	}
}

// TestChartNamesMatchTheCode checks the names the chart and the code share: the webhook
// paths the operator serves and the built-in class and location names.
func TestChartNamesMatchTheCode(t *testing.T) {
	objs := objects(t, render(t, nil))
	vwc := find(t, objs, "ValidatingWebhookConfiguration", "nodegroup-operator")
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	paths := map[string]string{}
	for _, h := range hooks {
		name, _, _ := unstructured.NestedString(h.(map[string]any), "name")
		path, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "path")
		resources, _, _ := unstructured.NestedSlice(h.(map[string]any), "rules")
		paths[name] = path
		t.Logf("%s: %s %v", name, path, resources)
	}
	want := map[string]string{
		"nodegroups.validate.nodegroup.io":       webhook.PathNodeGroup,
		"nodegroupclasses.validate.nodegroup.io": webhook.PathNodeGroupClass,
	}
	if !maps.Equal(paths, want) {
		t.Errorf("webhooks %v, want %v", paths, want)
	}
	for _, o := range []struct{ kind, name string }{
		{"NodeGroupClass", v1.BuiltinTalosClass},
		{"NodeGroupClass", v1.BuiltinKairosClass},
		{"Location", v1.BuiltinLocation},
	} {
		find(t, objs, o.kind, o.name)
	}
}

// TestREADMEDocumentsEveryValue checks that the chart's README has a row for every value
// in values.yaml (maps are documented as a whole when they are empty by default or
// listed in wholeMaps).
func TestREADMEDocumentsEveryValue(t *testing.T) {
	wholeMaps := map[string]bool{"resources": true, "metrics.dashboard.labels": true, "podSecurityContext": true, "securityContext": true}
	raw, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var leaves []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			path := prefix + k
			if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 && !wholeMaps[path] {
				walk(path+".", sub)
				continue
			}
			leaves = append(leaves, path)
		}
	}
	walk("", values)
	for _, leaf := range leaves {
		if !strings.Contains(string(readme), "| `"+leaf+"` |") {
			t.Errorf("README.md has no table row for `%s`", leaf)
		}
	}
	if len(leaves) < 30 {
		t.Errorf("only %d values found: the walk is broken", len(leaves))
	}
}
