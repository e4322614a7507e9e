package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// env is the real kube-apiserver and etcd every test in this package talks to.
var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: no test API server:", err)
		os.Exit(1)
	}
	v, err := env.ServerVersion(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the test API server does not answer /version:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "API server under test: kube-apiserver", v)
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test API server:", err)
	}
	os.Exit(code)
}
