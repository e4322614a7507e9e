package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook"
)

// validateOptions are validate's flags.
type validateOptions struct {
	poolFile, name, oldFile                                    string
	objects                                                    []string
	classFile, locationFile, oldClassFile, nsLabels, cpVersion string
	running                                                    bool
	namespace                                                  clusterFlags
}

func validateCommand() *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate -f pool.yaml",
		Short: "Check a pool offline as the API server and the operator's webhook would",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return status(validate(o, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.poolFile, "filename", "f", "", "the NodeGroup (YAML)")
	fs.StringVar(&o.name, "name", "", "the pool to validate, when the file holds several")
	fs.StringArrayVar(&o.objects, "objects", nil, "a YAML file of the objects the webhook reads: classes, locations, the pool's namespace, its Cluster and control plane, its MachineDeployment (repeatable); the pool is then judged by the webhook's own code, and --class, --location, --namespace-labels, --control-plane-version and --running are not used")
	fs.StringVar(&o.classFile, "class", "", "the NodeGroupClass the pool names (YAML); built-in classes need none")
	fs.StringVar(&o.locationFile, "location", "", "the Location the pool names (YAML); without it the built-in in-cluster location, which admits every namespace")
	fs.StringVar(&o.nsLabels, "namespace-labels", "", "labels of the pool's namespace, k=v,k=v")
	fs.StringVar(&o.cpVersion, "control-plane-version", "", "the release of the pool's control plane, for the version rules")
	fs.BoolVar(&o.running, "running", false, "the pool already has machines (its MachineDeployment exists)")
	fs.StringVar(&o.oldFile, "old", "", "the pool as it is now (YAML), to validate an update")
	fs.StringVar(&o.oldClassFile, "old-class", "", "the class the old pool names (YAML), when it is not built in")
	o.namespace = addNamespaceFlags(cmd)
	return cmd
}

func validate(o *validateOptions, stdout, stderr io.Writer) int {
	if o.poolFile == "" {
		fmt.Fprintln(stderr, "validate: -f pool.yaml is required")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ng, old, err := offline.ReadPool(ctx, o.poolFile, o.name, o.oldFile, o.namespace.setNamespace)
	if apierrors.IsInvalid(err) {
		// The API server refuses the pool itself, before its webhook would see it.
		fmt.Fprintf(stdout, "%s is refused:\n", poolName(o.namespace, o.poolFile, o.name))
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
	if len(o.objects) > 0 {
		store, resolver, err := offline.Cluster(ng, offline.ClusterFiles{Files: o.objects})
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
	in, err := loadInput(ctx, ng, old, o.classFile, o.locationFile, o.oldClassFile, o.nsLabels)
	if err != nil {
		fmt.Fprintln(stderr, "validate:", err)
		return 2
	}
	in.ControlPlaneVersion = o.cpVersion
	in.MachineDeploymentExists = o.running
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
// pool it replaces, or nil) read with offline.ReadPool.
func loadInput(ctx context.Context, ng, old *v1.NodeGroup, classFile, locationFile, oldClassFile, nsLabels string) (policy.Input, error) {
	in := policy.Input{Object: ng}
	var err error
	if in.Class, err = classSpec(ctx, ng.Spec.NodeGroupClassName, classFile); err != nil {
		return in, err
	}
	if old != nil {
		in.OldObject = old
		if in.OldClass, err = classSpec(ctx, old.Spec.NodeGroupClassName, oldClassFile); err != nil {
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
		if err := readObject(ctx, locationFile, "Location", ng.Spec.LocationName, loc); err != nil {
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

func classSpec(ctx context.Context, name, file string) (*v1.NodeGroupClassSpec, error) {
	if spec, ok := resolve.BuiltinClass(name); ok && file == "" {
		return &spec, nil
	}
	if file == "" {
		return nil, fmt.Errorf("the pool names class %q: pass it with --class", name)
	}
	class := &v1.NodeGroupClass{}
	if err := readObject(ctx, file, "NodeGroupClass", name, class); err != nil {
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
