package resolve

import (
	"strings"
	"testing"
)

func TestTenantDNSAddress(t *testing.T) {
	cases := []struct{ cidr, want, err string }{
		{"10.95.0.0/16", "10.95.0.10", ""},
		{"10.96.0.0/12", "10.96.0.10", ""},
		{"10.95.3.7/16", "10.95.0.10", ""}, // host bits are masked
		{"192.168.10.0/28", "192.168.10.10", ""},
		{"fd00:10:96::/108", "fd00:10:96::a", ""},
		{"fd00:10:96::ffff:fff0/124", "fd00:10:96::ffff:fffa", ""},
		{"::ffff:10.96.0.0/108", "::ffff:10.96.0.10", ""},
		{"10.0.0.0/29", "", "too small"},
		{"10.0.0.0", "", "is not a CIDR"},
		{"", "", "is not a CIDR"},
	}
	for _, tc := range cases {
		got, err := TenantDNSAddress(tc.cidr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("TenantDNSAddress(%q) = %q, %v; want error containing %q", tc.cidr, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("TenantDNSAddress(%q) = %q, %v; want %q", tc.cidr, got, err, tc.want)
		}
	}
}
