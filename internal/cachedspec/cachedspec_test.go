package cachedspec

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestDigestIgnoresOnlyReplicas(t *testing.T) {
	md := func(replicas int32, version string) *clusterv1.MachineDeployment {
		return &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "tenant", Replicas: ptr.To(replicas),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: "tenant", Version: version}},
		}}
	}
	base := Digest(md(1, "v1.35.4"))
	if base == "" {
		t.Fatal("no digest of a MachineDeployment")
	}
	if got := Digest(md(7, "v1.35.4")); got != base {
		t.Errorf("another replica count changed the digest: %s, want %s", got, base)
	}
	if got := Digest(md(1, "v1.35.0")); got == base {
		t.Error("another version left the digest as it was")
	}
	if Digest(&clusterv1.MachineHealthCheck{}) == "" {
		t.Error("no digest of a MachineHealthCheck")
	}
	if Digest(&corev1.Secret{}) != "" {
		t.Error("a digest of a kind the cache does not trim")
	}
}

func TestAnnotateReplacesWhatTheServerCarries(t *testing.T) {
	md := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{ClusterName: "tenant"}}
	got := Annotate(map[string]string{Annotation: "spoofed", "other": "kept"}, md)
	if got[Annotation] != Digest(md) || got["other"] != "kept" {
		t.Errorf("Annotate = %v, want the digest under %s and the rest kept", got, Annotation)
	}
	if got := Annotate(nil, md); got[Annotation] != Digest(md) {
		t.Errorf("Annotate(nil) = %v", got)
	}
	if got := Annotate(map[string]string{Annotation: "spoofed"}, &corev1.Secret{}); len(got) != 0 {
		t.Errorf("Annotate on another kind = %v, want the key removed", got)
	}
}
