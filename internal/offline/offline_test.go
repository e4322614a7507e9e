package offline

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

func TestStoreAnswersLikeAnAPIServer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "objects.yaml")
	content := "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: t}\nspec: {clusterIP: 10.96.0.7}\n---\n" +
		"apiVersion: controlplane.cluster.x-k8s.io/v1alpha2\nkind: KamajiControlPlane\nmetadata: {name: cp, namespace: t}\nspec: {version: v1.35.4, replicas: 2}\n"
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
	// A whole number is an int64, as a client decodes what an API server sends.
	if n, ok, err := unstructured.NestedInt64(cp.Object, "spec", "replicas"); n != 2 || !ok || err != nil {
		t.Fatalf("unstructured Get: replicas %d, %v, %v", n, ok, err)
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

// TestStoreLists: a list holds the objects of its kind in the namespace asked, that the
// label selector selects, whatever the list's type; a field selector is refused.
func TestStoreLists(t *testing.T) {
	s := NewStore(scheme.New())
	svc := func(ns, name string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	for _, obj := range []client.Object{
		svc("t", "b", map[string]string{"pool": "x"}), svc("t", "a", map[string]string{"pool": "x"}),
		svc("t", "c", nil), svc("other", "d", map[string]string{"pool": "x"}),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "s", Labels: map[string]string{"pool": "x"}}},
	} {
		if err := s.AddObject(obj); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	selected := []client.ListOption{client.InNamespace("t"), client.HasLabels{"pool"}}
	typed := &corev1.ServiceList{}
	if err := s.List(ctx, typed, selected...); err != nil {
		t.Fatal(err)
	}
	if len(typed.Items) != 2 || typed.Items[0].Name != "a" || typed.Items[1].Name != "b" {
		t.Fatalf("typed list: %v", typed.Items)
	}
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceList"))
	if err := s.List(ctx, meta, client.MatchingLabels{"pool": "x"}); err != nil || len(meta.Items) != 3 {
		t.Fatalf("metadata list across namespaces: %v, %d items", err, len(meta.Items))
	}
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceList"))
	if err := s.List(ctx, u, client.InNamespace("t")); err != nil || len(u.Items) != 3 || u.Items[0].GetKind() != "Service" {
		t.Fatalf("unstructured list: %v, %d items", err, len(u.Items))
	}
	if err := s.List(ctx, &corev1.ServiceList{}, client.MatchingFields{"spec.clusterIP": "x"}); err == nil {
		t.Fatal("a field selector was accepted")
	}
}

// TestSecretStringData: a Secret file may give its values as stringData; they are read
// as data, over a data key of the same name, as the API server stores them.
func TestSecretStringData(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret.yaml")
	content := "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: t}\n" +
		"data: {a: YQ==, b: b2xk}\nstringData: {b: new, c: \"x: y\"}\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(scheme.New())
	if err := s.AddFile(file); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Secret{}
	if err := s.Get(context.Background(), client.ObjectKey{Namespace: "t", Name: "s"}, got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "a", "b": "new", "c": "x: y"}
	if len(got.Data) != len(want) || got.StringData != nil {
		t.Fatalf("data %v, stringData %v; want data %v and no stringData", got.Data, got.StringData, want)
	}
	for k, v := range want {
		if string(got.Data[k]) != v {
			t.Fatalf("data[%s] = %q, want %q", k, got.Data[k], v)
		}
	}
}
