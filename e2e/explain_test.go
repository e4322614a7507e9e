//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/gobuild"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// plugin is the kubectl-nodegroup binary built from this checkout, once per run of the
// suite, into the environment's folder.
var plugin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(env.Work, "kubectl-nodegroup")
	if err := gobuild.Build(context.Background(), testenv.RepoRoot(), "./cmd/kubectl-nodegroup", gobuild.Host(), "", bin); err != nil {
		return "", err
	}
	return bin, nil
})

// explainPool runs `kubectl nodegroup explain` on the pool as a platform operator types
// it (the management admin kubeconfig) and returns what it prints and its exit code: 0
// for a ready pool, 1 for one that is not.
func explainPool(ctx context.Context, ng *v1.NodeGroup) (string, int, error) {
	bin, err := plugin()
	if err != nil {
		return "", 0, err
	}
	out, err := exec.CommandContext(ctx, bin, "explain", ng.Name, "-n", ng.Namespace, "--kubeconfig", env.Kubeconfig).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return string(out), 1, nil
	case err != nil:
		return string(out), 0, fmt.Errorf("kubectl nodegroup explain: %v\n%s", err, out)
	}
	return string(out), 0, nil
}
