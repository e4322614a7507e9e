package render

import "testing"

func TestReserveAndAllocatable(t *testing.T) {
	cases := []struct {
		name        string
		size        MachineSize
		kubeCPU     int64
		kubeMemory  int64
		allocCPU    string
		allocMemory string
	}{
		// 2 cores: 60 + 10 = 70m kube, 100m system. 4Gi: 1Gi kube, 256Mi system, 100Mi eviction.
		{"2 cores 4Gi", MachineSize{MilliCPU: 2000, MemoryBytes: 4 * gibi}, 70, gibi, "1830m", "2716Mi"},
		// 4 cores: 60+10+10 = 80m. 8Gi: 1Gi + 0.8Gi, rounded up to whole MiB.
		{"4 cores 8Gi", MachineSize{MilliCPU: 4000, MemoryBytes: 8 * gibi}, 80, 1844 * mebi, "3820m", "5992Mi"},
		// 1 core: 60m. 1Gi: 256Mi kube.
		{"1 core 1Gi", MachineSize{MilliCPU: 1000, MemoryBytes: gibi}, 60, 256 * mebi, "840m", "412Mi"},
		// Too small for the reservations: never negative.
		{"tiny", MachineSize{MilliCPU: 100, MemoryBytes: 256 * mebi}, 6, 64 * mebi, "0", "0Mi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Reserve(tc.size)
			if r.KubeReservedMilliCPU != tc.kubeCPU || r.KubeReservedMemoryBytes != tc.kubeMemory {
				t.Fatalf("kube reserved = %dm %d bytes, want %dm %d bytes", r.KubeReservedMilliCPU, r.KubeReservedMemoryBytes, tc.kubeCPU, tc.kubeMemory)
			}
			cpu, mem := Allocatable(tc.size)
			if got := MilliCPUString(cpu); got != tc.allocCPU {
				t.Errorf("allocatable cpu = %s, want %s", got, tc.allocCPU)
			}
			if got := MemoryString(mem); got != tc.allocMemory {
				t.Errorf("allocatable memory = %s, want %s", got, tc.allocMemory)
			}
		})
	}
}
