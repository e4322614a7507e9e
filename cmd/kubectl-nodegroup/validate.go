package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook"
)

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	poolFile := fs.String("f", "", "the NodeGroup (YAML)")
	name := fs.String("name", "", "the pool to validate, when the file holds several")
	var objects multiFlag
	fs.Var(&objects, "objects", "a YAML file of the objects the webhook reads: classes, locations, the pool's namespace, its Cluster and control plane, its MachineDeployment (repeatable); the pool is then judged by the webhook's own code, and --class, --location, --namespace-labels, --control-plane-version and --running are not used")
	classFile := fs.String("class", "", "the NodeGroupClass the pool names (YAML); built-in classes need none")
	locationFile := fs.String("location", "", "the Location the pool names (YAML); without it the built-in in-cluster location, which admits every namespace")
	nsLabels := fs.String("namespace-labels", "", "labels of the pool's namespace, k=v,k=v")
	cpVersion := fs.String("control-plane-version", "", "the release of the pool's control plane, for the version rules")
	running := fs.Bool("running", false, "the pool already has machines (its MachineDeployment exists)")
	oldFile := fs.String("old", "", "the pool as it is now (YAML), to validate an update")
	oldClassFile := fs.String("old-class", "", "the class the old pool names (YAML), when it is not built in")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *poolFile == "" {
		fmt.Fprintln(stderr, "validate: -f pool.yaml is required")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ng, old, err := readPool(ctx, *poolFile, *name, *oldFile)
	if apierrors.IsInvalid(err) {
		// The API server refuses the pool itself, before its webhook would see it.
		fmt.Fprintf(stdout, "%s is refused:\n", poolName(*poolFile, *name))
		refusedByAPIServer(stdout, "  - ", err)
		return 1
	}
	if err != nil {
		if !refusedByAPIServer(stderr, "validate: ", err) {
			fmt.Fprintln(stderr, "validate:", err)
		}
		return 2
	}
	pool := "NodeGroup " + ng.Namespace + "/" + ng.Name
	if len(objects) > 0 {
		store, resolver, err := offlineCluster(objects, ng, "", "", "")
		if err != nil {
			fmt.Fprintln(stderr, "validate:", err)
			return 2
		}
		denied, err := (&webhook.NodeGroupValidator{Reader: store, Resolver: resolver}).Check(ctx, ng, old)
		if err != nil {
			fmt.Fprintln(stderr, "validate:", err)
			return 2
		}
		if denied == "" {
			fmt.Fprintf(stdout, "%s is admitted\n", pool)
			return 0
		}
		fmt.Fprintf(stdout, "%s is refused:\n  - %s\n", pool, denied)
		return 1
	}
	in, err := loadInput(ng, old, *classFile, *locationFile, *oldClassFile, *nsLabels)
	if err != nil {
		fmt.Fprintln(stderr, "validate:", err)
		return 2
	}
	in.ControlPlaneVersion = *cpVersion
	in.MachineDeploymentExists = *running
	violations, err := policy.Evaluate(ctx, in)
	if err != nil {
		fmt.Fprintln(stderr, "validate:", err)
		return 2
	}
	if len(violations) == 0 {
		fmt.Fprintf(stdout, "%s is admitted\n", pool)
		return 0
	}
	fmt.Fprintf(stdout, "%s is refused:\n", pool)
	for _, v := range violations {
		fmt.Fprintf(stdout, "  - %s (%s)\n", v.String(), v.Rule)
	}
	return 1
}

// loadInput builds the rules' input from the files given by flag, for a pool (and the
// pool it replaces, or nil) read with readPool.
func loadInput(ng, old *v1.NodeGroup, classFile, locationFile, oldClassFile, nsLabels string) (policy.Input, error) {
	in := policy.Input{Object: ng}
	var err error
	if in.Class, err = classSpec(ng.Spec.NodeGroupClassName, classFile); err != nil {
		return in, err
	}
	if old != nil {
		in.OldObject = old
		if in.OldClass, err = classSpec(old.Spec.NodeGroupClassName, oldClassFile); err != nil {
			return in, err
		}
	}
	if locationFile == "" {
		if ng.Spec.LocationName != v1.BuiltinLocation {
			return in, fmt.Errorf("the pool names location %q: pass it with --location", ng.Spec.LocationName)
		}
		in.Location = &v1.LocationSpec{Provider: v1.LocationProvider{Type: v1.ProviderKubeVirt, KubeVirt: &v1.KubeVirtProvider{}},
			AllowedNamespaces: &metav1.LabelSelector{}}
	} else {
		loc := &v1.Location{}
		if err := readObject(locationFile, "Location", ng.Spec.LocationName, loc); err != nil {
			return in, err
		}
		if loc.Name != ng.Spec.LocationName {
			return in, fmt.Errorf("%s is Location %q, the pool names %q", locationFile, loc.Name, ng.Spec.LocationName)
		}
		in.Location = &loc.Spec
	}
	in.NamespaceLabels = map[string]string{}
	for _, kv := range strings.Split(nsLabels, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return in, fmt.Errorf("--namespace-labels: %q is not k=v", kv)
		}
		in.NamespaceLabels[k] = v
	}
	return in, nil
}

func classSpec(name, file string) (*v1.NodeGroupClassSpec, error) {
	if spec, ok := resolve.BuiltinClass(name); ok && file == "" {
		return &spec, nil
	}
	if file == "" {
		return nil, fmt.Errorf("the pool names class %q: pass it with --class", name)
	}
	class := &v1.NodeGroupClass{}
	if err := readObject(file, "NodeGroupClass", name, class); err != nil {
		return nil, err
	}
	if class.Name != name {
		return nil, fmt.Errorf("%s is NodeGroupClass %q, the pool names %q", file, class.Name, name)
	}
	if err := policy.CompileClassRules(class.Spec.PoolRules); err != nil {
		return nil, fmt.Errorf("class %q: %w", name, err)
	}
	return &class.Spec, nil
}
