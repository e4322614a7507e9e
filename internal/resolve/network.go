package resolve

import (
	"fmt"
	"net/netip"
)

// dnsOffset is the position of the cluster DNS address in the service range: the
// kubeadm and Kamaji convention (10.96.0.0/12 gives 10.96.0.10).
const dnsOffset = 10

// TenantDNSAddress is the tenant CoreDNS address: the 10th address of the cluster's first
// service CIDR. A range too small to hold it is refused with a clear error.
func TenantDNSAddress(cidr string) (string, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("service CIDR %q is not a CIDR: %w", cidr, err)
	}
	prefix = prefix.Masked()
	hostBits := prefix.Addr().BitLen() - prefix.Bits()
	// The range must hold the network address, addresses 1..10 and (IPv4) a broadcast
	// address: 12 addresses, so at least 4 host bits.
	if hostBits < 4 {
		return "", fmt.Errorf("service CIDR %s is too small to hold the DNS address (its %dth address)", cidr, dnsOffset)
	}
	// With 4 or more host bits, Next cannot run past the end of the address space.
	addr := prefix.Addr()
	for range dnsOffset {
		addr = addr.Next()
	}
	return addr.String(), nil
}
