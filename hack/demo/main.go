// Command demo shows the operator at work on a laptop: it starts a local control plane
// (etcd and kube-apiserver from hack/testbin.sh's cache) with this project's CRDs and the
// upstream Cluster API provider CRDs, runs the operator binary against it, applies
// examples/ with the stand-ins of hack/demo/stand-ins.yaml (the Services a real cluster
// and Kamaji would have), waits until the pools are reconciled and prints what the
// operator made.
//
// The chart is installed with the Helm Go SDK and the operator runs with the arguments
// and environment of the chart's Deployment, under the chart's ServiceAccount, with its
// admission webhook on (its own certificate, called by the API server on loopback): the
// demo proves what ships is enough to admit and reconcile pools.
//
// Usage: go run ./hack/demo [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
	"github.com/nodegroup-io/nodegroup-operator/internal/yamldocs"
)

func main() {
	keep := flag.Bool("keep", false, "keep the control plane and the operator running; print the kubeconfig path")
	flag.Parse()
	start := time.Now()
	if err := run(*keep, start); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(keep bool, start time.Time) error {
	ctx := context.Background()
	root := testenv.RepoRoot()
	work, err := os.MkdirTemp("", "nodegroup-demo-")
	if err != nil {
		return err
	}

	step("building the operator")
	bin := filepath.Join(work, "nodegroup-operator")
	if err := localrun.BuildOperator(root, bin); err != nil {
		return err
	}

	step("starting etcd and kube-apiserver with the provider CRDs")
	crds, err := testenv.ProviderCRDs()
	if err != nil {
		return err
	}
	// This project's CRDs come with the chart install below, from their own chart.
	env, err := testenv.Start(testenv.Options{CRDs: crds, WithoutProjectCRDs: true})
	if err != nil {
		return err
	}
	defer func() {
		if !keep {
			_ = env.Stop()
			_ = os.RemoveAll(work)
		}
	}()
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig(), 0o600); err != nil {
		return err
	}

	step("installing the CRD chart, then the chart, with the Helm SDK (all but the Deployment; the webhook on loopback)")
	rel, local, err := localrun.Deploy(ctx, env.Config, env.Client, root, work, nil, 24*time.Hour)
	if err != nil {
		return err
	}

	step("starting the operator as the chart's Deployment runs it, until it is ready")
	cmd, err := rel.Command(local)
	if err != nil {
		return err
	}
	op, err := cmd.Start(ctx, "nodegroup-operator", bin, filepath.Join(work, "operator.log"), 2*time.Minute)
	if err != nil {
		return err
	}
	defer func() {
		if !keep {
			op.Stop(10 * time.Second)
		}
	}()

	// Through the operator's webhook: a pool it refuses fails here.
	step("applying examples/ and the demo's stand-ins")
	c := env.Client
	for _, f := range []string{"examples/platform.yaml", "examples/tenant.yaml", "hack/demo/stand-ins.yaml"} {
		if err := applyFile(ctx, c, filepath.Join(root, filepath.FromSlash(f))); err != nil {
			return err
		}
	}
	// No cluster DNS, Kamaji or Cluster API runs here: the stand-ins are the DNS Service
	// and the tenant API server's Service, and the demo writes what the providers would,
	// the cluster's CA, a kubeconfig that names this API server as the tenant cluster,
	// and its address as the Cluster's control-plane endpoint. The operator makes the
	// Talos join identity from them.
	if err := playControlPlaneProvider(ctx, c, "tenant-demo", "demo", env.KubeConfig(), env.Config.Host); err != nil {
		return err
	}
	if err := applyFile(ctx, c, filepath.Join(root, "examples", "pools.yaml")); err != nil {
		return err
	}

	step("waiting for the pools to be reconciled")
	pools, err := waitPools(ctx, c, "tenant-demo", 3, 90*time.Second)
	if err != nil {
		return fmt.Errorf("%w (operator log: %s)", err, op.Log)
	}
	if err := summary(ctx, c, pools); err != nil {
		return err
	}
	if err := dnsSummary(ctx, c, "tenant-demo", "demo"); err != nil {
		return err
	}
	if err := identitySummary(ctx, c, "tenant-demo", "demo"); err != nil {
		return fmt.Errorf("%w (operator log: %s)", err, op.Log)
	}
	// The examples are meant to render: a pool that did not is a failed demo.
	for _, p := range pools {
		if r := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionRendered); r.Status != metav1.ConditionTrue {
			return fmt.Errorf("pool %s is not rendered: %s (operator log: %s)", p.Name, r.Message, op.Log)
		}
	}
	fmt.Printf("\ndemo finished in %s\n", time.Since(start).Round(time.Second))
	if !keep {
		fmt.Println("Run `make demo DEMO_ARGS=-keep` to keep the control plane and the operator running and look further with kubectl.")
	}
	if keep {
		fmt.Printf("\nThe control plane and the operator keep running. Look further with:\n"+
			"  export KUBECONFIG=%s\n  kubectl get nodegroups,machinedeployments -A\n  kubectl describe nodegroup -n tenant-demo burst\n"+
			"Operator log: %s\nPress Ctrl-C to stop.\n", kubeconfig, op.Log)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt)
		<-sig
		op.Stop(10 * time.Second)
		_ = env.Stop()
	}
	return nil
}

func step(s string) { fmt.Fprintf(os.Stderr, "==> %s\n", s) }

// applyFile creates every object of a multi-document YAML file by server-side apply.
func applyFile(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := yamldocs.Objects(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("demo"), client.ForceOwnership); err != nil {
			return fmt.Errorf("%s: applying %s %s: %w", path, obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// waitPools waits until every pool's status describes its spec and says Rendered
// (True, or False with a reason that needs a person: a demo must not hang on it).
func waitPools(ctx context.Context, c client.Client, ns string, want int, timeout time.Duration) ([]v1.NodeGroup, error) {
	deadline := time.Now().Add(timeout)
	for {
		var list v1.NodeGroupList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		done := 0
		for _, p := range list.Items {
			if r := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionRendered); r != nil && p.Status.ObservedGeneration == p.Generation {
				done++
			}
		}
		if done == want && len(list.Items) == want {
			sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
			return list.Items, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d pools reconciled after %s", done, want, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func summary(ctx context.Context, c client.Client, pools []v1.NodeGroup) error {
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nPOOL\tCLASS\tOS\tMIN..MAX\tRENDERED\tREASON\tMACHINEDEPLOYMENT")
	for _, p := range pools {
		r := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionRendered)
		fmt.Fprintf(w, "%s\t%s\t%s\t%d..%d\t%s\t%s\t%s\n", p.Name, p.Spec.NodeGroupClassName, p.Status.OS,
			p.Spec.MinReplicas, p.Spec.MaxReplicas, r.Status, r.Reason, p.Status.MachineDeploymentName)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, p := range pools {
		r := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionRendered)
		if r.Status != metav1.ConditionTrue {
			fmt.Printf("\npool %s is not rendered: %s\n", p.Name, r.Message)
			continue
		}
		md := &clusterv1.MachineDeployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Status.MachineDeploymentName}, md); err != nil {
			return err
		}
		fmt.Printf("\nMachineDeployment %s (pool %s), version %s\n", md.Name, p.Name, md.Spec.Template.Spec.Version)
		fmt.Printf("  bootstrap template:      %s %s\n", md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind, md.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
		fmt.Printf("  infrastructure template: %s %s\n", md.Spec.Template.Spec.InfrastructureRef.Kind, md.Spec.Template.Spec.InfrastructureRef.Name)
		keys := make([]string, 0, len(md.Annotations))
		for k := range md.Annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("  %s: %s\n", k, md.Annotations[k])
		}
	}
	return nil
}

// dnsSummary shows the tenant DNS address the operator published on the control plane,
// waiting briefly for it: kubeadm-joined workers take their cluster DNS from it.
func dnsSummary(ctx context.Context, c client.Client, ns, name string) error {
	kcp := &unstructured.Unstructured{}
	kcp.SetAPIVersion("controlplane.cluster.x-k8s.io/v1alpha2")
	kcp.SetKind("KamajiControlPlane")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kcp); err != nil {
			return err
		}
		ips, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "network", "dnsServiceIPs")
		if len(ips) > 0 || time.Now().After(deadline) {
			fmt.Printf("\nKamajiControlPlane %s/%s: spec.network.dnsServiceIPs = %v (published by the operator)\n", ns, name, ips)
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// playControlPlaneProvider writes what the Kamaji provider and Cluster API write for a
// Cluster with a Kamaji control plane once its API server runs: <cluster>-ca,
// <cluster>-kubeconfig and the Cluster's spec.controlPlaneEndpoint.
func playControlPlaneProvider(ctx context.Context, c client.Client, ns, cluster string, kubeconfig []byte, server string) error {
	secrets, err := testenv.KamajiSecrets(ns, cluster, kubeconfig)
	if err != nil {
		return err
	}
	for _, obj := range secrets {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("writing the control-plane provider's Secret %s: %w", obj.GetName(), err)
		}
	}
	u, err := url.Parse(server)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("the API server address %s has no port", server)
	}
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, cl); err != nil {
		return err
	}
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: u.Hostname(), Port: int32(port)}
	return c.Patch(ctx, cl, patch)
}

// identitySummary shows the Talos join identity the operator made for the cluster and
// the bootstrap token it keeps in the tenant cluster (here the same API server).
func identitySummary(ctx context.Context, c client.Client, ns, cluster string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		secret := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + resolve.TalosSecretSuffix}, secret)
		if err == nil {
			id, _, _ := strings.Cut(string(secret.Data[resolve.TalosKeyBootstrapToken]), ".")
			token := &corev1.Secret{}
			if err = c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + id}, token); err == nil {
				fmt.Printf("\nSecret %s/%s: the cluster's Talos join identity, made by the operator (%s)\n", ns, secret.Name, secret.Labels[names.LabelManagedBy])
				fmt.Printf("  tenant cluster: kube-system/%s (%s) lets its workers join\n", token.Name, token.Type)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no Talos join identity with its tenant bootstrap token after 30s: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
