package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
)

// parityNamespace is the only namespace the operator started by TestRenderAsTheOperator
// watches, so the pools of the other tests of this package are left alone.
const parityNamespace = "render-parity"

// sparsePool leaves every defaulted field to the CRD.
const sparsePool = `apiVersion: nodegroup.io/v1alpha1
kind: NodeGroup
metadata: {name: sparse, namespace: render-parity}
spec:
  clusterName: tenant
  maxReplicas: 2
  resources: {cpu: 2, memory: 4Gi}
  gpus: [{deviceName: nvidia.com/GA102GL_A10}]
`

// locationFile is a Location as a platform writes it, leaving its CRD's defaults out
// (spec.provider.kubevirt.evictionStrategy); render reads it from this file, the operator
// from the API server, which defaulted it.
const locationFile = `apiVersion: nodegroup.io/v1alpha1
kind: Location
metadata: {name: parity-zone}
spec:
  provider: {type: KubeVirt, kubevirt: {storageClassName: replicated}}
  zone: zone-a
  allowedNamespaces: {}
`

// locatedPool is a pool in that Location.
const locatedPool = `apiVersion: nodegroup.io/v1alpha1
kind: NodeGroup
metadata: {name: located, namespace: render-parity}
spec:
  clusterName: tenant
  locationName: parity-zone
  maxReplicas: 2
  resources: {cpu: "2", memory: 4Gi}
`

// parityPools are the example pools (examples/pools.yaml), moved to the test tenant,
// and sparsePool, as the files render reads.
func parityPools(t *testing.T) map[string]string {
	t.Helper()
	pools := map[string]string{"sparse": sparsePool, "located": locatedPool}
	for _, u := range examples(t, "pools.yaml") {
		u.SetNamespace(parityNamespace)
		_ = unstructured.SetNestedField(u.Object, testenv.TenantCluster, "spec", "clusterName")
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		pools[u.GetName()] = string(b)
	}
	return pools
}

// TestRenderAsTheOperator applies pools to a real API server with the operator's pool
// controller running, and compares what it applied with what render prints for the
// same files and the objects the controller read: the same objects, names (content
// hashes of the defaulted pool) and specs, less what the API server and apply add.
func TestRenderAsTheOperator(t *testing.T) {
	ctx := context.Background()
	startOperator(t)
	objectsFile := tenantObjects(t)
	location := write(t, "location.yaml", locationFile)
	if err := env.Client.Create(ctx, mustObject(t, locationFile)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	for name, pool := range parityPools(t) {
		t.Run(name, func(t *testing.T) {
			poolFile := write(t, name+".yaml", pool)
			var out, errOut bytes.Buffer
			if code := run([]string{"render", "-f", poolFile, "--objects", objectsFile, "--objects", location, "-o", "json"}, &out, &errOut); code != 0 {
				t.Fatalf("render exit %d: %s", code, errOut.String())
			}
			var list struct{ Items []*unstructured.Unstructured }
			if err := json.Unmarshal(out.Bytes(), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) == 0 {
				t.Fatal("render printed nothing")
			}
			if err := env.Client.Create(ctx, mustObject(t, pool)); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			for _, want := range list.Items {
				live := &unstructured.Unstructured{}
				live.SetGroupVersionKind(want.GroupVersionKind())
				testenv.Eventually(t, want.GetKind()+" "+want.GetName(), func() bool {
					return env.Client.Get(ctx, client.ObjectKeyFromObject(want), live) == nil
				})
				got, exp := comparable(live), comparable(withCRDDefaults(t, want))
				if !bytes.Equal(got, exp) {
					t.Errorf("%s %s: the operator applied\n%s\nrender printed\n%s", want.GetKind(), want.GetName(), got, exp)
				}
			}
		})
	}
}

// comparable is an object's JSON less what the API server adds (uid, resourceVersion,
// creationTimestamp, managedFields, generation, status) and what apply adds and render
// cannot know (the owner reference to the pool, by its uid, and apply's record of what
// it applied, AnnotationApplied, which holds the object's generation).
func comparable(u *unstructured.Unstructured) []byte {
	u = u.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "ownerReferences"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "annotations", apply.AnnotationApplied)
	if a := u.GetAnnotations(); a != nil && len(a) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
	}
	delete(u.Object, "status")
	b, _ := json.MarshalIndent(u.Object, "", "  ")
	return b
}

// withCRDDefaults is u with the defaults of its CRD on the API server applied, as the
// API server applies them when the operator creates it. The plugin carries only this
// project's CRD: the providers' CRDs (Cluster API, the Kairos and KubeVirt providers)
// default a few fields render leaves out, which changes no template name.
func withCRDDefaults(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	mapping, err := env.Client.RESTMapper().RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: mapping.Resource.Resource + "." + mapping.Resource.Group}, crd); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	kind, err := customresource.Load(b, u.GroupVersionKind().Version)
	if err != nil {
		t.Fatal(err)
	}
	u = u.DeepCopy()
	kind.Default(u)
	return u
}

// examples are the objects of a file of examples/.
func examples(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := yamldocs.Objects(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func mustObject(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	objs, err := yamldocs.Objects([]byte(doc))
	if err != nil || len(objs) != 1 {
		t.Fatalf("%v, %d objects", err, len(objs))
	}
	return objs[0]
}

var operatorStarted sync.Once

// startOperator runs the pool controller as the operator does, watching parityNamespace,
// once per test binary.
func startOperator(t *testing.T) {
	t.Helper()
	var err error
	operatorStarted.Do(func() { err = startOperatorOnce() })
	if err != nil {
		t.Fatal(err)
	}
}

func startOperatorOnce() error {
	return env.RunManager(operatorOptions(), func(mgr ctrl.Manager) error {
		if err := operator.RegisterIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return err
		}
		r := &nodegroup.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Catalog: catalog.Default(),
			ManagementDNS: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, ManagementDNSDomain: "cluster.local"}
		return r.Register(mgr, 2)
	})
}

func operatorOptions() ctrl.Options {
	opts := operator.ManagerOptions()
	opts.Cache.DefaultNamespaces = map[string]cache.Config{parityNamespace: {}}
	return opts
}

// tenantObjects creates the test tenant (its Talos identity made by the platform), the
// example Kairos class and the built-ins, and writes them as the API server holds them
// (Services with their ClusterIP) to a file for render.
func tenantObjects(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	once, objs, err := testenv.TenantObjects(parityNamespace, testenv.TenantOptions{TalosSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range examples(t, "platform.yaml") {
		if u.GetKind() == "NodeGroupClass" {
			objs = append(objs, u)
		}
	}
	var docs []string
	for _, obj := range append(once, objs...) {
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		live := &unstructured.Unstructured{}
		gvk, err := env.Client.GroupVersionKindFor(obj)
		if err != nil {
			t.Fatal(err)
		}
		live.SetGroupVersionKind(gvk)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
			t.Fatal(err)
		}
		b, err := yaml.Marshal(live.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return write(t, "objects.yaml", strings.Join(docs, "---\n"))
}
