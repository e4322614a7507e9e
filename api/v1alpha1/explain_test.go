package v1alpha1_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
)

// TestExplainDocumentsEveryField reads the OpenAPI v3 document that `kubectl explain`
// reads from the API server, and requires a description on every field of the three
// kinds, down to the leaves.
func TestExplainDocumentsEveryField(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The API server publishes a CRD's OpenAPI document shortly after the CRD is
	// established, so wait for it.
	var gv openapi.GroupVersion
	deadline := time.Now().Add(30 * time.Second)
	for {
		paths, err := dc.OpenAPIV3().Paths()
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := paths["apis/nodegroup.io/v1alpha1"]; ok {
			gv = p
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server publishes no OpenAPI v3 document for nodegroup.io/v1alpha1")
		}
		time.Sleep(200 * time.Millisecond)
	}
	raw, err := gv.Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"NodeGroup", "NodeGroupClass", "Location"} {
		t.Run(kind, func(t *testing.T) {
			schema, ok := doc.Components.Schemas["io.nodegroup.v1alpha1."+kind]
			if !ok {
				t.Fatalf("no schema for %s", kind)
			}
			if d, _ := schema["description"].(string); d == "" {
				t.Errorf("%s has no description", kind)
			}
			var missing []string
			props, _ := schema["properties"].(map[string]any)
			for _, top := range []string{"spec", "status"} {
				if p, ok := props[top].(map[string]any); ok {
					missing = append(missing, undocumented(top, p)...)
				} else if top == "spec" {
					t.Fatalf("%s has no spec", kind)
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Errorf("fields without a description in kubectl explain:\n  %s", strings.Join(missing, "\n  "))
			}
		})
	}
}

// undocumented walks a schema and returns the paths of properties without a description.
// Standard Kubernetes types (conditions, label selectors) are documented upstream.
func undocumented(path string, schema map[string]any) []string {
	var out []string
	if d, _ := schema["description"].(string); d == "" && !strings.HasSuffix(path, "]") {
		out = append(out, path)
	}
	for _, key := range []string{"allOf", "oneOf", "anyOf"} {
		if list, ok := schema[key].([]any); ok {
			for _, s := range list {
				if m, ok := s.(map[string]any); ok {
					if _, isRef := m["$ref"]; isRef {
						return nil // a referenced upstream type such as metav1.Condition
					}
				}
			}
		}
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		for name, p := range props {
			if m, ok := p.(map[string]any); ok {
				out = append(out, undocumented(path+"."+name, m)...)
			}
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		out = append(out, undocumented(path+"[]", items)...)
	}
	return out
}
