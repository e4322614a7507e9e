package nodegroup_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
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
		objs, err := yamldocs.Objects(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, obj := range objs {
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
