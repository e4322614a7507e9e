package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/apply"
	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	autoscalerctl "github.com/nodegroup-io/nodegroup-operator/internal/controller/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/credentials"
	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// managedKinds are the kinds of all the objects the operator creates for pools.
var managedKinds = append(slices.Clip(names.TemplateKinds),
	clusterv1.GroupVersion.WithKind("MachineDeployment"),
	clusterv1.GroupVersion.WithKind("MachineHealthCheck"),
	corev1.SchemeGroupVersion.WithKind("Secret"),
	// Each cluster's autoscaler (every benchmark cluster has autoscaled pools); its
	// kubeconfig Secret is a Secret, above.
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
	rbacv1.SchemeGroupVersion.WithKind("Role"),
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
)

// bareJob is what the operator creates for one pool, in the order it creates it: the
// Kairos worker password Secret (once per cluster, with its first Kairos pool), the
// templates, the MachineDeployment and its health check.
type bareJob struct {
	objects []*unstructured.Unstructured
}

// runBare measures the limit: the bodies the operator sends for every pool (rendered
// with the operator's resolve, render and apply packages), created directly by a client
// as parallel as the operator, in the pools' own namespaces. A warm-up pass comes first
// so neither client pays the API server's first requests; the objects are deleted
// afterwards so the operator starts from nothing.
func (h *harness) runBare(ctx context.Context) error {
	jobs, err := h.renderAll(ctx)
	if err != nil {
		return err
	}
	h.jobs = jobs
	warm := jobs[:min(len(jobs), 4*h.cfg.Concurrency)]
	if _, _, err := h.createAll(ctx, warm); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := h.deleteManaged(ctx); err != nil {
		return err
	}
	return h.bareRun(ctx, phaseBare, &h.res.Bare)
}

// runBareAgain measures the limit a second time, after the operator's phases, on the
// control plane as they left it (more objects and history than the first time), once
// the operator's objects are deleted: the two bracket the operator's run.
func (h *harness) runBareAgain(ctx context.Context) error {
	if err := h.deleteManaged(ctx); err != nil {
		return err
	}
	if err := h.bareRun(ctx, phaseBareAgain, &h.res.BareAgain); err != nil {
		return err
	}
	if mean := (h.res.Bare.Seconds + h.res.BareAgain.Seconds) / 2; mean > 0 {
		h.res.Ratio = h.res.Cold.Seconds / mean
	}
	return nil
}

// bareRun times the bare client creating every job's objects, then deletes them.
func (h *harness) bareRun(ctx context.Context, phase string, into *Phase) error {
	before := h.cpuNow()
	start := time.Now()
	h.profile(ctx, phase)
	n, bytes, err := h.createAll(ctx, h.jobs)
	end := time.Now()
	if err != nil {
		return err
	}
	h.mark(phase, start, end)
	into.Seconds = end.Sub(start).Seconds()
	into.CPU = h.cpuNow().since(before)
	if h.res.Objects.Bare != 0 && (n != h.res.Objects.Bare || bytes != h.res.Objects.BareBytes) {
		return fmt.Errorf("the bare client created %d objects (%d bytes), %d (%d bytes) the first time", n, bytes, h.res.Objects.Bare, h.res.Objects.BareBytes)
	}
	h.res.Objects.Bare, h.res.Objects.BareBytes = n, bytes
	h.logf("    %d objects (%.1f MiB) in %.1f s", n, float64(bytes)/(1<<20), into.Seconds)
	h.profiles.Wait() // the profile window ends before the objects are deleted
	return h.deleteManaged(ctx)
}

func (h *harness) renderAll(ctx context.Context) ([]bareJob, error) {
	r := &resolve.Resolver{
		Client: h.admin, APIReader: h.admin, Mapper: h.admin.RESTMapper(), Catalog: catalog.Default(),
		ManagementDNS: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, ManagementDNSDomain: "cluster.local",
	}
	// The pools of a Talos cluster render from its join identity: made here as the
	// operator makes it, for the render, then deleted; the first Talos pool's job creates
	// it again, with its token in the tenant cluster.
	identities := make([][]*unstructured.Unstructured, len(h.tenant))
	if err := parallel(ctx, 8, len(h.tenant), func(ctx context.Context, i int) error {
		if !h.hasTalos(i) {
			return nil
		}
		objs, err := h.talosIdentity(ctx, h.tenant[i])
		if err != nil {
			return err
		}
		identities[i] = objs
		return h.admin.Create(ctx, objs[0].DeepCopy())
	}); err != nil {
		return nil, err
	}
	scalers, err := h.autoscalers(ctx)
	if err != nil {
		return nil, err
	}
	jobs := make([]bareJob, len(h.pools))
	err = parallel(ctx, 8, len(h.pools), func(ctx context.Context, i int) error {
		p := h.pools[i]
		ng := h.watch.get(p)
		if ng == nil {
			return fmt.Errorf("pool %s not seen by the watch", p.key())
		}
		ng = ng.DeepCopy()
		in, err := r.Resolve(ctx, ng)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", p.key(), err)
		}
		out, err := render.Render(in)
		if err != nil {
			return fmt.Errorf("rendering %s: %w", p.key(), err)
		}
		var job bareJob
		if p.index == p.tenant*h.cfg.PoolsPerNamespace {
			job.objects = append(job.objects, scalers[p.tenant]...)
		}
		if p.os == v1.OSTalos && h.firstOf(p, v1.OSTalos) {
			job.objects = append(job.objects, identities[p.tenant]...)
		}
		if in.KairosUserSecret != "" && h.firstOf(p, v1.OSKairos) {
			s, err := h.workerPassword(ctx, p.namespace)
			if err != nil {
				return err
			}
			job.objects = append(job.objects, s)
		}
		for _, obj := range out.Objects() {
			u, err := apply.Desired(apply.NodeGroupOwner(ng), obj)
			if err != nil {
				return err
			}
			job.objects = append(job.objects, u)
		}
		jobs[i] = job
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, h.deleteManaged(ctx)
}

// autoscalers are the objects of every cluster's autoscaler as the operator makes them:
// from the settings the chart renders, for the cluster's control plane version, with
// the machine template kind of its pools (KubeVirt's).
func (h *harness) autoscalers(ctx context.Context) ([][]*unstructured.Unstructured, error) {
	rel, err := localrun.Render(h.root, h.values(0))
	if err != nil {
		return nil, err
	}
	cmd, err := rel.Command(localrun.Local{Kubeconfig: h.operatorKubeconfig, Dir: filepath.Join(h.cfg.Work, "bare")})
	if err != nil {
		return nil, err
	}
	settings, err := autoscaler.ParseSettings(cmd.AutoscalerSettings)
	if err != nil {
		return nil, err
	}
	r := &autoscalerctl.Reconciler{Client: h.admin, APIReader: h.admin, Settings: settings, Catalog: catalog.Default()}
	templates := []schema.GroupResource{capk.GroupVersion.WithResource("kubevirtmachinetemplates").GroupResource()}
	out := make([][]*unstructured.Unstructured, len(h.tenant))
	err = parallel(ctx, 8, len(h.tenant), func(ctx context.Context, i int) error {
		cluster := &clusterv1.Cluster{}
		if err := h.admin.Get(ctx, client.ObjectKey{Namespace: h.tenant[i], Name: testenv.TenantCluster}, cluster); err != nil {
			return err
		}
		pools, err := r.AutoscaledPools(ctx, cluster)
		if err != nil {
			return err
		}
		in, waiting, err := r.Input(ctx, cluster, pools)
		if err != nil {
			return err
		}
		if waiting != nil {
			return fmt.Errorf("the autoscaler of %s: %s", h.tenant[i], waiting.Message)
		}
		in.TemplateResources = templates
		owner := apply.Owner{Object: cluster, GVK: clusterv1.GroupVersion.WithKind("Cluster")}
		for _, obj := range autoscaler.Objects(in) {
			u, err := apply.Desired(owner, obj)
			if err != nil {
				return err
			}
			out[i] = append(out[i], u)
		}
		return nil
	})
	return out, err
}

// firstOf: p is the first pool of its namespace on os.
func (h *harness) firstOf(p *pool, os v1.OSFamily) bool {
	for _, q := range h.pools[p.tenant*h.cfg.PoolsPerNamespace : p.index] {
		if q.os == os {
			return false
		}
	}
	return p.os == os
}

// hasTalos: the i-th tenant has a Talos pool.
func (h *harness) hasTalos(i int) bool {
	return slices.ContainsFunc(h.pools[i*h.cfg.PoolsPerNamespace:(i+1)*h.cfg.PoolsPerNamespace], func(p *pool) bool { return p.os == v1.OSTalos })
}

// talosIdentity is what the operator makes for a Talos cluster: <cluster>-talos and,
// in the tenant cluster (this API server), its bootstrap token Secret.
func (h *harness) talosIdentity(ctx context.Context, ns string) ([]*unstructured.Unstructured, error) {
	cluster := &clusterv1.Cluster{}
	if err := h.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster}, cluster); err != nil {
		return nil, err
	}
	ca := &corev1.Secret{}
	if err := h.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster + "-ca"}, ca); err != nil {
		return nil, err
	}
	id, err := joinidentity.IdentitySecret(h.admin.Scheme(), cluster, ca.Data[corev1.TLSCertKey], time.Now())
	if err != nil {
		return nil, err
	}
	token := joinidentity.TokenSecret(cluster, string(id.Data[resolve.TalosKeyBootstrapToken]))
	var out []*unstructured.Unstructured
	for _, s := range []*corev1.Secret{id, token} {
		s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
		u, err := toUnstructured(s)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// workerPassword is the Secret credentials.EnsureWorkerPassword creates for a cluster.
func (h *harness) workerPassword(ctx context.Context, ns string) (*unstructured.Unstructured, error) {
	cluster := &clusterv1.Cluster{}
	if err := h.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.TenantCluster}, cluster); err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: credentials.WorkerPasswordName(cluster.Name),
			Labels: map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelClusterName: cluster.Name},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{credentials.WorkerPasswordKey: []byte(base64.RawStdEncoding.EncodeToString(raw))},
	}
	if err := controllerutil.SetOwnerReference(cluster, s, h.admin.Scheme()); err != nil {
		return nil, err
	}
	return toUnstructured(s)
}

func toUnstructured(s *corev1.Secret) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// createAll creates the jobs' objects with the bare client, as many jobs at once as the
// operator reconciles pools, and returns the objects created and their stored size.
func (h *harness) createAll(ctx context.Context, jobs []bareJob) (int, int64, error) {
	var n, bytes atomic.Int64
	err := parallel(ctx, h.cfg.Concurrency, len(jobs), func(ctx context.Context, i int) error {
		for _, obj := range jobs[i].objects {
			o := obj.DeepCopy()
			if err := h.bare.Create(ctx, o, client.FieldOwner(bareServiceAccount), client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
				return fmt.Errorf("creating %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
			n.Add(1)
			bytes.Add(storedSize(o))
		}
		return nil
	})
	return int(n.Load()), bytes.Load(), err
}

// storedSize is the JSON size of an object as the API server returned it, without what
// differs between two creates of the same body (identity, versions, timestamps,
// managedFields).
func storedSize(u *unstructured.Unstructured) int64 {
	c := u.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	b, _ := json.Marshal(c.Object)
	return int64(len(b))
}

// deleteManaged deletes every object with the operator's managed-by label in the
// tenant namespaces, and checks that none is left.
func (h *harness) deleteManaged(ctx context.Context) error {
	sel := client.MatchingLabels{names.LabelManagedBy: names.ManagedByValue}
	// The bootstrap tokens in the tenant clusters (this API server's kube-system).
	if err := h.admin.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(metav1.NamespaceSystem), sel); err != nil {
		return fmt.Errorf("deleting the tenant bootstrap tokens: %w", err)
	}
	err := parallel(ctx, 16, len(h.tenant), func(ctx context.Context, i int) error {
		for _, gvk := range managedKinds {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			if err := h.admin.DeleteAllOf(ctx, u, client.InNamespace(h.tenant[i]), sel); err != nil {
				return fmt.Errorf("deleting %s in %s: %w", gvk.Kind, h.tenant[i], err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, gvk := range managedKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := h.admin.List(ctx, list, sel); err != nil {
			return err
		}
		for _, o := range list.Items {
			if poolObject(&o) {
				return fmt.Errorf("%s %s/%s is left after the delete", gvk.Kind, o.Namespace, o.Name)
			}
		}
	}
	return nil
}
