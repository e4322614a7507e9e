package nodegroup_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestGoldenObjectsAcceptedByUpstreamCRDs sends every object of every render golden file
// to the real API server, which holds the upstream Cluster API, CAPK and CABPT CRDs, as a
// dry-run create with strict field validation: an unknown or misspelt field, a wrong
// type or a broken CEL rule of the provider fails here.
func TestGoldenObjectsAcceptedByUpstreamCRDs(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob("../../render/testdata/*.golden.yaml")
	if err != nil || len(files) < 14 {
		t.Fatalf("want at least 14 render golden files, found %d (%v)", len(files), err)
	}
	namespaces := map[string]bool{}
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(data, []byte("error: ")) {
			continue // a case whose golden output is render's refusal
		}
		for i, doc := range strings.Split(string(data), "\n---\n") {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s document %d: %v", file, i, err)
			}
			if ns := obj.GetNamespace(); !namespaces[ns] {
				mustCreateOnce(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
				namespaces[ns] = true
			}
			err := env.Client.Create(ctx, obj, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
			if err != nil {
				t.Errorf("%s: %s %s refused: %v", filepath.Base(file), obj.GetKind(), obj.GetName(), err)
			}
			checked++
		}
	}
	t.Logf("%d rendered objects accepted by the upstream CRDs", checked)
}
