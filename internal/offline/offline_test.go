package offline

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

func TestStoreAnswersLikeAnAPIServer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "objects.yaml")
	content := "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: t}\nspec: {clusterIP: 10.96.0.7}\n---\n" +
		"apiVersion: controlplane.cluster.x-k8s.io/v1alpha2\nkind: KamajiControlPlane\nmetadata: {name: cp, namespace: t}\nspec: {version: v1.35.4}\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(scheme.New())
	if err := s.AddFile(file); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc := &corev1.Service{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: "t", Name: "api"}, svc); err != nil || svc.Spec.ClusterIP != "10.96.0.7" {
		t.Fatalf("typed Get: %v, clusterIP %q", err, svc.Spec.ClusterIP)
	}
	cp := &unstructured.Unstructured{}
	mapping, err := Mapper().RESTMapping(svcGK("controlplane.cluster.x-k8s.io", "KamajiControlPlane"))
	if err != nil {
		t.Fatal(err)
	}
	cp.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := s.Get(ctx, client.ObjectKey{Namespace: "t", Name: "cp"}, cp); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(cp.Object, "spec", "version"); v != "v1.35.4" {
		t.Fatalf("unstructured Get: version %q", v)
	}
	if err := s.Get(ctx, client.ObjectKey{Namespace: "t", Name: "missing"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Fatalf("missing object: %v, want NotFound", err)
	}
	if err := s.Get(ctx, client.ObjectKey{Namespace: "other", Name: "api"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Fatalf("object of another namespace: %v, want NotFound", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("apiVersion: v1\nmetadata: {name: x}\n"), 0o644)
	if err := s.AddFile(bad); err == nil {
		t.Fatal("an object without a kind was accepted")
	}
}

func svcGK(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }
