package render

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The checks of what render writes into a Talos machine config (and, for node labels, a
// Kairos one): tenant strings that leave YAML for another text format, names, addresses
// and certificates. Each reports through the caller, so every problem of an Input is
// reported at once.

// checkNodeLabel refuses a label the kubelet's --node-labels flag cannot carry intact: the
// flag is "k=v,k=v", so a comma or an equals sign in a key, or a comma in a value, would
// add a label of the tenant's choosing (a node role, say). A valid Kubernetes label has
// neither, and the kubelet refuses to start with an invalid one anyway, so anything else
// is refused here with a message rather than rendered into a node that never joins.
func checkNodeLabel(key, value string) []error {
	var errs []error
	if len(validation.IsQualifiedName(key)) > 0 {
		errs = append(errs, fmt.Errorf("node label key %q is not a valid label key: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", key))
	}
	if len(validation.IsValidLabelValue(value)) > 0 {
		errs = append(errs, fmt.Errorf("node label %q: value %q is not a valid label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", key, value))
	}
	return errs
}

// reservedLabelDomain mirrors the NodeGroup CRD rule: tenant label keys in the
// kubernetes.io, k8s.io and nodegroup.io domains are the platform's (the kubelet refuses
// most of them, and the topology ones come from the Location).
func reservedLabelDomain(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range [...]string{"kubernetes.io", "k8s.io", "nodegroup.io"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// hasLineBreak: a tenant string with a line feed is refused wherever it would reach the
// machine config as a YAML string (the CRD refuses one in each of those fields). The
// config's encoder, machinery's over gopkg.in/yaml.v3, writes such a string as a literal
// block, and its block writer gets some of them wrong: "\n" and "\na" read back as ""
// and "a", "\t\n" does not parse (yaml/go-yaml#76, go-yaml/yaml#643, open), so the
// value would not stay the tenant's data. FuzzTalosTenantStrings checks the rest.
func hasLineBreak(s string) bool { return strings.IndexByte(s, '\n') >= 0 }

func validKernelModule(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func validSysctlName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	prevSep := true // no separator first
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' || c == '/':
			if prevSep {
				return false
			}
			prevSep = true
		case isLowerAlnum(c) || c == '_' || c == '-':
			prevSep = false
		default:
			return false
		}
	}
	return !prevSep // no separator last
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// checkCertificates requires one or more PEM certificates and nothing else: a CA bundle
// that carried the CA's private key would hand it to every worker. Only the PEM framing
// is checked (Talos parses the certificates); that is enough to see what each block is.
func checkCertificates(bad func(string, ...any), what, s string) {
	const begin, end = "-----BEGIN ", "-----END CERTIFICATE-----"
	for rest := s; ; {
		i := strings.Index(rest, begin)
		if i < 0 {
			break
		}
		rest = rest[i+len(begin):]
		typ, _, _ := strings.Cut(rest, "-----")
		if typ != "CERTIFICATE" {
			bad("%s holds a PEM %q block: only certificates may reach workers", what, typ)
			return
		}
	}
	if t := strings.TrimSpace(s); !strings.HasPrefix(t, begin) || !strings.HasSuffix(t, end) {
		bad("%s is empty or not a PEM certificate", what)
	}
}

func checkDNSDomain(bad func(string, ...any), what, s string) {
	if s == "" {
		return
	}
	if len(validation.IsDNS1123Subdomain(s)) > 0 {
		bad("%s %q is not a DNS name", what, s)
	}
}

func checkPrefixes(bad func(string, ...any), what string, ss []string) {
	for _, s := range ss {
		if _, err := netip.ParsePrefix(s); err != nil {
			bad("%s %q is not a CIDR", what, s)
		}
	}
}

func checkAddress(bad func(string, ...any), what, s string) {
	if s == "" {
		return
	}
	if _, err := netip.ParseAddr(s); err != nil {
		bad("%s %q is not an IP address", what, s)
	}
}

// validHost: an IP address or a DNS name. The name is checked first: a control-plane
// host is usually one, and a failed ParseAddr allocates its error.
func validHost(h string) bool {
	if len(validation.IsDNS1123Subdomain(h)) == 0 {
		return true
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}
