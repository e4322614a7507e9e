package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Naming. Machine names derive from the MachineDeployment name (CAPI appends two
// five-character suffixes: the MachineSet's and the Machine's), and a Machine's name
// becomes its VM's and its node's hostname, which must fit a DNS label (63 characters).
// So the MachineDeployment name is kept to maxDeploymentName characters.
const (
	maxDeploymentName = 50
	// maxTemplateName keeps template names valid DNS labels too.
	maxTemplateName = 63
	// maxLabelValue is the Kubernetes limit for a label value.
	maxLabelValue = 63
	// nameHashLen is the length of the hash suffix added to a shortened name.
	nameHashLen = 8
	// maxClusterName keeps a satellite Cluster's name a valid label value, which Cluster
	// API writes it as (cluster.x-k8s.io/cluster-name).
	maxClusterName = 63
)

// SatelliteName is the name of the Cluster API Cluster that runs a tenant cluster's
// pools on one location, and of its InfraCluster: `<cluster>-<location>-<hash>`, the
// readable part shortened and its dots made dashes so the whole is a DNS label, the hash
// (of cluster and location) always there. It lives in the tenant's namespace beside the
// tenant's own Clusters: the hash keeps it from taking the name of a Cluster the tenant
// calls `<cluster>-<location>`, and keeps ("a-b", "c") and ("a", "b-c") apart.
func SatelliteName(cluster, location string) string {
	sum := sha256.Sum256([]byte(cluster + "/" + location))
	prefix := strings.ReplaceAll(cluster+"-"+location, ".", "-")
	if max := maxClusterName - 1 - nameHashLen; len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-")
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:nameHashLen]
}

// MachineClusterName is the Cluster API Cluster a pool's machines run under: the
// tenant's Cluster, or its satellite on the pool's location when the location has
// satellites (api/v1alpha1 LocationProvider.Satellite).
func MachineClusterName(cluster, location string, satellite bool) string {
	if satellite {
		return SatelliteName(cluster, location)
	}
	return cluster
}

// SatelliteCredentialsName is the name of the operator's copy, in a tenant namespace, of
// a Proxmox location's credentials Secret for one satellite: `<satellite>-credentials`.
// One copy per satellite, not per namespace: capmox makes its ProxmoxCluster an owner
// of the Secret it reads, with a finalizer it removes only when no other owner is left.
func SatelliteCredentialsName(cluster, location string) string {
	return SatelliteName(cluster, location) + "-credentials"
}

// MachineDeploymentName is the stable name of a pool's MachineDeployment:
// `<cluster>-<pool>`, shortened with a hash of the full name when that is too long.
// Dots (allowed in pool names) become dashes, with the hash, because the name ends up
// in hostnames.
func MachineDeploymentName(cluster, pool string) string {
	return dnsLabel(cluster+"-"+pool, maxDeploymentName)
}

// TemplateName is the name of an immutable template: `<pool>-<content hash>`, the pool
// part shortened so the whole stays a valid DNS label.
func TemplateName(pool, contentHash string) string {
	return dnsLabel(pool, maxTemplateName-1-len(contentHash)) + "-" + contentHash
}

// dnsLabel is shorten for names that must be DNS labels: a name with dots gets them
// replaced and a hash of the original, so `a.b` and `a-b` stay distinct.
func dnsLabel(s string, max int) string {
	if !strings.Contains(s, ".") {
		return shorten(s, max)
	}
	sum := sha256.Sum256([]byte(s))
	replaced := strings.ReplaceAll(s, ".", "-")
	return shorten(replaced, max-1-nameHashLen) + "-" + hex.EncodeToString(sum[:])[:nameHashLen]
}

// LabelValue makes a name usable as a label value: names longer than 63 characters are
// shortened with a hash suffix, so distinct names stay distinct.
func LabelValue(name string) string { return shorten(name, maxLabelValue) }

// shorten returns s when it fits in max characters; otherwise a prefix of s, a dash and
// the first nameHashLen hex digits of sha256(s). The prefix never ends in '-' or '.',
// so the result stays a valid DNS name and label value.
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	prefix := s[:max-1-nameHashLen]
	for len(prefix) > 0 && (prefix[len(prefix)-1] == '-' || prefix[len(prefix)-1] == '.') {
		prefix = prefix[:len(prefix)-1]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:nameHashLen]
}
