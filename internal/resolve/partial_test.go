package resolve_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// TestResolveReportsWhatPassed: a failed resolve says which of its conditions passed,
// and returns what it resolved for them, so the controller can report them True.
func TestResolveReportsWhatPassed(t *testing.T) {
	r := tenantResolver(t)
	for _, tc := range []struct {
		name      string
		spec      v1.NodeGroupSpec
		condition string
		passed    []string
	}{
		{"class", v1.NodeGroupSpec{NodeGroupClassName: "nope", LocationName: v1.BuiltinLocation, ClusterName: testenv.TenantCluster},
			v1.ConditionClassResolved, nil},
		{"location", v1.NodeGroupSpec{NodeGroupClassName: v1.BuiltinKairosClass, LocationName: "nowhere", ClusterName: testenv.TenantCluster},
			v1.ConditionLocationResolved, []string{v1.ConditionClassResolved}},
		{"cluster", v1.NodeGroupSpec{NodeGroupClassName: v1.BuiltinTalosClass, LocationName: v1.BuiltinLocation, ClusterName: "other"},
			v1.ConditionClusterFound, []string{v1.ConditionClassResolved, v1.ConditionLocationResolved}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "workers"}, Spec: tc.spec}
			in, err := r.Resolve(context.Background(), ng)
			var rerr *resolve.Error
			if !errors.As(err, &rerr) || rerr.Condition != tc.condition {
				t.Fatalf("error %v, want a resolve error of %s", err, tc.condition)
			}
			if got := rerr.Passed(); !slices.Equal(got, tc.passed) {
				t.Errorf("passed %v, want %v", got, tc.passed)
			}
			if in == nil {
				t.Fatal("no input returned with the error")
			}
			for _, c := range rerr.Passed() {
				switch c {
				case v1.ConditionClassResolved:
					if in.Class.OS == "" {
						t.Error("ClassResolved passed, but the input has no class")
					}
				case v1.ConditionLocationResolved:
					if in.Location.Provider.KubeVirt == nil {
						t.Error("LocationResolved passed, but the input has no location")
					}
				}
			}
		})
	}
	if got := (&resolve.Error{Condition: v1.ConditionRendered}).Passed(); !slices.Equal(got, resolve.Conditions()) {
		t.Errorf("a failure on Rendered passed %v, want all of %v", got, resolve.Conditions())
	}
}
