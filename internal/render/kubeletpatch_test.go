package render

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// kubeletPatchConfig is the kubeadm patch kubeletPatch writes, as a struct: the
// reference the hand-written document is compared with.
type kubeletPatchConfig struct {
	APIVersion     string            `json:"apiVersion"`
	Kind           string            `json:"kind"`
	KubeReserved   map[string]string `json:"kubeReserved"`
	SystemReserved map[string]string `json:"systemReserved"`
	EvictionHard   map[string]string `json:"evictionHard"`
	MaxPods        int32             `json:"maxPods"`
}

// TestKubeletPatchMatchesLibrary: the patch is, byte for byte, what sigs.k8s.io/yaml
// writes for the same content, over machine sizes whose quantities take every form
// (whole cores, millicores, Mi, Ki, bytes).
func TestKubeletPatchMatchesLibrary(t *testing.T) {
	for _, cpu := range []int64{1, 100, 999, 1000, 1500, 2000, 4000, 16000, 1000000, 50000000} {
		for _, mem := range []int64{1, 1000, 1024, mebi - 1, mebi, 256 * mebi, gibi, 4*gibi + 1, 4*gibi + 1024, 8 * gibi, 64 * gibi, 1 << 40, 3<<40 + 7} {
			m := MachineSize{MilliCPU: cpu, MemoryBytes: mem}
			r := Reserve(m)
			want, err := yaml.Marshal(kubeletPatchConfig{
				APIVersion: "kubelet.config.k8s.io/v1beta1",
				Kind:       "KubeletConfiguration",
				KubeReserved: map[string]string{
					"cpu": MilliCPUString(r.KubeReservedMilliCPU), "memory": MemoryString(r.KubeReservedMemoryBytes),
				},
				SystemReserved: map[string]string{
					"cpu": MilliCPUString(r.SystemReservedMilliCPU), "memory": MemoryString(r.SystemReservedMemoryBytes),
					"ephemeral-storage": systemReservedEphemeralStorage, "pid": systemReservedPID,
				},
				EvictionHard: map[string]string{
					"memory.available": MemoryString(r.EvictionHardMemoryBytes), "nodefs.available": evictionNodefsAvailable,
					"nodefs.inodesFree": evictionNodefsInodesFree, "imagefs.available": evictionImagefsAvailable,
					"imagefs.inodesFree": evictionImagefsInodesFree,
				},
				MaxPods: r.MaxPods,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := kubeletPatch(&Input{Machine: m}); got != string(want) {
				t.Fatalf("%dm %d bytes: kubeletPatch =\n%s\nsigs.k8s.io/yaml writes\n%s", cpu, mem, got, want)
			}
		}
	}
}

// TestPatchValueQuoting pins the quoting rule against the library for the value forms
// the patch can hold.
func TestPatchValueQuoting(t *testing.T) {
	for _, v := range []string{"0", "7", "110", "1000000", "70m", "1Gi", "0Mi", "1023Ki", "10%", "5%", "256Mi", "2"} {
		want, err := yaml.Marshal(map[string]string{"k": v})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendPatchValue(nil, "k: ", v); string(got) != string(want) {
			t.Errorf("appendPatchValue(%q) = %q, sigs.k8s.io/yaml writes %q", v, got, want)
		}
	}
}
