package names

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNames(t *testing.T) {
	long := strings.Repeat("a", 40) + "." + strings.Repeat("b", 40)
	cases := []struct{ cluster, pool, want string }{
		{"tenant-a", "workers", "tenant-a-workers"},
		{"tenant-a", long, "tenant-a-aaaaaaaaaaaaaaaa"},
		{"tenant-a", "web.v2", "tenant-a-web-v2-"},
	}
	for _, tc := range cases {
		got := MachineDeploymentName(tc.cluster, tc.pool)
		if len(got) > maxDeploymentName {
			t.Errorf("%q is %d long, limit %d", got, len(got), maxDeploymentName)
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("%q is not a DNS label: %v", got, errs)
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("MachineDeploymentName(%q, %q) = %q, want prefix %q", tc.cluster, tc.pool, got, tc.want)
		}
	}
	// Two long names that share a prefix stay distinct.
	for _, pair := range [][2]string{{long + "x", long + "y"}, {"web.v2", "web-v2"}} {
		if a, b := MachineDeploymentName("c", pair[0]), MachineDeploymentName("c", pair[1]); a == b {
			t.Errorf("distinct pools %q and %q got the same name %q", pair[0], pair[1], a)
		}
	}
	if got := TemplateName(long+long, "0123456789"); len(got) > 63 || !strings.HasSuffix(got, "-0123456789") {
		t.Errorf("TemplateName = %q (%d)", got, len(got))
	}
	if got := LabelValue(long); len(got) > 63 || len(validation.IsValidLabelValue(got)) > 0 {
		t.Errorf("LabelValue = %q: %v", got, validation.IsValidLabelValue(got))
	}
	if got := LabelValue("short"); got != "short" {
		t.Errorf("LabelValue(short) = %q", got)
	}
}

func TestSatelliteName(t *testing.T) {
	long := strings.Repeat("c", 60)
	seen := map[string][2]string{}
	for _, pair := range [][2]string{
		{"tenant-a", "pve-lab"}, {"tenant-a", "pve.lab"}, {"tenant-a", "pve-lab2"},
		{"a-b", "c"}, {"a", "b-c"}, {long, "pve-lab"}, {long, "pve-wan"}, {"t", long + "-" + long},
	} {
		got := SatelliteName(pair[0], pair[1])
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("SatelliteName(%q, %q) = %q is not a DNS label: %v", pair[0], pair[1], got, errs)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("SatelliteName gives %q to both %q and %q", got, prev, pair)
		}
		seen[got] = pair
		if got != SatelliteName(pair[0], pair[1]) {
			t.Errorf("SatelliteName(%q, %q) is not stable", pair[0], pair[1])
		}
	}
	if got := SatelliteName("tenant-a", "pve-lab"); !strings.HasPrefix(got, "tenant-a-pve-lab-") || len(got) != len("tenant-a-pve-lab-")+nameHashLen {
		t.Errorf("SatelliteName(tenant-a, pve-lab) = %q, want tenant-a-pve-lab-<hash>", got)
	}
	if got := SatelliteCredentialsName(long, long); len(validation.IsDNS1123Subdomain(got)) > 0 || got != SatelliteName(long, long)+"-credentials" {
		t.Errorf("SatelliteCredentialsName = %q", got)
	}
}
