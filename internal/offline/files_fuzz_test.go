package offline_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// readFile is what the plugin does with the files it is given, with the checks of the
// fuzz test: nothing panics, and a pool the API server would admit reads back the same
// from what it was stored as, and is admitted as an update of itself (kubectl apply of
// an unchanged file).
func readFile(t *testing.T, data []byte, name string) {
	ctx := context.Background()
	f := offline.File{Path: "file.yaml", Data: data}
	var class v1.NodeGroupClass
	if f.Decode(ctx, "NodeGroupClass", name, &class) == nil {
		_ = policy.CompileClassRules(class.Spec.PoolRules)
	}
	_ = f.Decode(ctx, "Location", name, &v1.Location{})

	pool, _, err := offline.Pool(ctx, f, name, nil, nil)
	if err != nil {
		return
	}
	stored, err := json.Marshal(pool)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := offline.Pool(ctx, offline.File{Path: "stored.json", Data: stored}, "", nil, nil)
	if err != nil {
		t.Fatalf("the pool as stored is refused: %v\n%s\nread from\n%s", err, stored, data)
	}
	if !equality.Semantic.DeepEqual(pool, again) {
		t.Fatalf("the pool as stored reads back as\n%+v\nnot\n%+v\nfrom\n%s", again.Spec, pool.Spec, data)
	}
	if _, _, err := offline.Pool(ctx, f, name, &f, nil); err != nil {
		t.Fatalf("the pool is refused as an update of itself: %v\n%s", err, data)
	}
}

func FuzzReadFile(f *testing.F) {
	for _, file := range []string{"examples/pools.yaml", "examples/platform.yaml", "examples/tenant.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), filepath.FromSlash(file)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "")
		f.Add(data, "kairos")
	}
	for _, p := range fuzzSeeds() {
		pool, class, location := p.build()
		f.Add(pool, "")
		f.Add(class, "")
		f.Add(location, "")
	}
	f.Add([]byte("kind: NodeGroup\n---\n---\nkind: [\n"), "x")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		defer watchdog("reading a file")()
		readFile(t, data, name)
	})
}
