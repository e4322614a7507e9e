package controlplanedns_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A paused Cluster's control plane gets no address, even when its first pool comes;
// resumed (the annotation removed), it gets it.
func TestPausedClusterNotPublished(t *testing.T) {
	ns := tenant(t, "10.96.0.0/16", nil)
	c := getCluster(t, ns)
	patch := client.MergeFrom(c.DeepCopy())
	c.SetAnnotations(map[string]string{clusterv1.PausedAnnotation: ""})
	if err := env.Client.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	waitQuiet(t)
	w := writes.Load()
	env.MustCreate(t, pool(ns, "workers"))
	time.Sleep(time.Second)
	waitQuiet(t)
	if n := writes.Load() - w; n != 0 {
		t.Fatalf("a paused Cluster's control plane got %d writes", n)
	}
	if _, set, _ := unstructured.NestedFieldNoCopy(controlPlane(t, ns).Object, "spec", "network", "dnsServiceIPs"); set {
		t.Fatal("spec.network.dnsServiceIPs set on a paused Cluster's control plane")
	}

	c = getCluster(t, ns)
	patch = client.MergeFrom(c.DeepCopy())
	delete(c.Annotations, clusterv1.PausedAnnotation)
	if err := env.Client.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	waitDNS(t, ns, "10.96.0.10")
}
