package render

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProxmoxObjectsForTest renders the Proxmox objects of every Proxmox golden case that
// renders, and of the hostile case, for the tests of package render_test (which may
// import testenv, itself an importer of render).
func ProxmoxObjectsForTest(t testing.TB) map[string][]client.Object {
	cases := proxmoxGoldenCases(t)
	cases["proxmox-hostile"] = proxmoxHostile(t)
	out := map[string][]client.Object{}
	for name, in := range cases {
		if objs, err := proxmoxObjects(in); err == nil {
			out[name] = objs
		}
	}
	return out
}
