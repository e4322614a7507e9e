package v1alpha1_test

import (
	"testing"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// env is the real kube-apiserver and etcd every test in this package talks to.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, false, func(e *testenv.Env) error { env = e; return nil })
}
