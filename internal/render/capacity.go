package render

import "strconv"

// Reservations is what the kubelet keeps back from pods on a machine of a given size.
// The bootstrap configs write these into the kubelet configuration and the autoscaler's
// capacity annotations subtract them, both from Reserve, so the two never disagree.
type Reservations struct {
	// KubeReservedMilliCPU and KubeReservedMemoryBytes are reserved for the kubelet and
	// the container runtime.
	KubeReservedMilliCPU    int64
	KubeReservedMemoryBytes int64
	// SystemReservedMilliCPU and SystemReservedMemoryBytes are reserved for the OS.
	SystemReservedMilliCPU    int64
	SystemReservedMemoryBytes int64
	// EvictionHardMemoryBytes is the kubelet's hard eviction threshold, memory.available.
	EvictionHardMemoryBytes int64
	// MaxPods is the kubelet's pod limit.
	MaxPods int32
}

const (
	mebi = int64(1) << 20
	gibi = int64(1) << 30

	// systemReservedMilliCPU and systemReservedMemory are a flat reservation for the OS
	// (Talos' and Kairos' own services are small and do not grow with the machine).
	systemReservedMilliCPU = 100
	systemReservedMemory   = 256 * mebi
	// evictionHardMemory is the kubelet's default memory.available threshold.
	evictionHardMemory = 100 * mebi
	// maxPods is the kubelet's default.
	maxPods = 110
)

// Reserve computes the reservations for a machine. The kubelet share grows with the
// machine in tiers, the way the large managed platforms size it (a share of each slice
// of CPU and memory, smaller for each further slice), so small machines keep most of
// their size for pods and large ones keep enough for the kubelet.
func Reserve(m MachineSize) Reservations {
	return Reservations{
		KubeReservedMilliCPU:      tiered(m.MilliCPU, cpuTiers),
		KubeReservedMemoryBytes:   roundUp(tiered(m.MemoryBytes, memoryTiers), mebi),
		SystemReservedMilliCPU:    systemReservedMilliCPU,
		SystemReservedMemoryBytes: systemReservedMemory,
		EvictionHardMemoryBytes:   evictionHardMemory,
		MaxPods:                   maxPods,
	}
}

// Allocatable is what pods can use on a machine: its size minus the reservations and,
// for memory, the hard eviction threshold. Never negative.
func Allocatable(m MachineSize) (milliCPU, memoryBytes int64) {
	r := Reserve(m)
	milliCPU = m.MilliCPU - r.KubeReservedMilliCPU - r.SystemReservedMilliCPU
	memoryBytes = m.MemoryBytes - r.KubeReservedMemoryBytes - r.SystemReservedMemoryBytes - r.EvictionHardMemoryBytes
	return max(milliCPU, 0), max(memoryBytes, 0)
}

// tier reserves per mille of the part of a size that falls inside [from, to).
type tier struct {
	from, to int64
	perMille int64
}

const unbounded = int64(1) << 62

// cpuTiers: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% above.
var cpuTiers = []tier{{0, 1000, 60}, {1000, 2000, 10}, {2000, 4000, 5}, {4000, unbounded, 2}}

// memoryTiers: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the
// next 112, 2% above 128 GiB.
var memoryTiers = []tier{
	{0, 4 * gibi, 250}, {4 * gibi, 8 * gibi, 200}, {8 * gibi, 16 * gibi, 100},
	{16 * gibi, 128 * gibi, 60}, {128 * gibi, unbounded, 20},
}

// roundUp keeps memory reservations in whole MiB, so every consumer writes the same
// short quantity.
func roundUp(v, unit int64) int64 { return (v + unit - 1) / unit * unit }

func tiered(size int64, tiers []tier) int64 {
	var total int64
	for _, t := range tiers {
		if size <= t.from {
			break
		}
		part := min(size, t.to) - t.from
		total += part * t.perMille / 1000
	}
	return total
}

// Quantity strings in the forms the kubelet configuration and the autoscaler read.

// MilliCPUString formats millicores as a Kubernetes quantity ("1500m", "2").
func MilliCPUString(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return withSuffix(m, "m")
}

// MemoryString formats bytes as a Kubernetes quantity in Mi, or in Ki where Mi would
// round (the exact value matters: both consumers must read the same number).
func MemoryString(b int64) string {
	if b%mebi == 0 {
		return withSuffix(b/mebi, "Mi")
	}
	if b%1024 == 0 {
		return withSuffix(b/1024, "Ki")
	}
	return strconv.FormatInt(b, 10)
}

// withSuffix is v and a unit suffix, built in a stack buffer so the string is the only
// allocation (these are written for every pool on every resync).
func withSuffix(v int64, suffix string) string {
	var buf [24]byte
	return string(append(strconv.AppendInt(buf[:0], v, 10), suffix...))
}
