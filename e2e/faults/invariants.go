//go:build e2e

package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/e2e/framework"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/joinidentity"
	"github.com/nodegroup-io/nodegroup-operator/internal/credentials"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

// managed selects what the operator made.
var managed = client.MatchingLabels{names.LabelManagedBy: names.ManagedByValue}

// live is one read of every object the invariants look at, across the run's namespaces.
type live struct {
	mds      []clusterv1.MachineDeployment
	mhcs     []clusterv1.MachineHealthCheck
	sets     []clusterv1.MachineSet
	machines []clusterv1.Machine
	// templates of every kind render makes; others the operator's other kinds.
	templates []unstructured.Unstructured
	secrets   []corev1.Secret
	others    []client.Object
}

func (w *world) read(ctx context.Context) (*live, error) {
	c := w.env.Client
	l := &live{}
	var mds clusterv1.MachineDeploymentList
	var mhcs clusterv1.MachineHealthCheckList
	var sets clusterv1.MachineSetList
	var machines clusterv1.MachineList
	var secrets corev1.SecretList
	var deps appsv1.DeploymentList
	var sas corev1.ServiceAccountList
	var roles rbacv1.RoleList
	var bindings rbacv1.RoleBindingList
	for _, r := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{
		{&mds, nil}, {&mhcs, nil}, {&sets, nil}, {&machines, nil},
		{&secrets, []client.ListOption{managed}}, {&deps, []client.ListOption{managed}},
		{&sas, []client.ListOption{managed}}, {&roles, []client.ListOption{managed}}, {&bindings, []client.ListOption{managed}},
	} {
		if err := c.List(ctx, r.list, r.opts...); err != nil {
			return nil, err
		}
	}
	for _, gvk := range names.TemplateKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			return nil, err
		}
		l.templates = append(l.templates, list.Items...)
	}
	l.mds, l.mhcs, l.sets, l.machines, l.secrets = mds.Items, mhcs.Items, sets.Items, machines.Items, secrets.Items
	for i := range deps.Items {
		l.others = append(l.others, &deps.Items[i])
	}
	for i := range sas.Items {
		l.others = append(l.others, &sas.Items[i])
	}
	for i := range roles.Items {
		l.others = append(l.others, &roles.Items[i])
	}
	for i := range bindings.Items {
		l.others = append(l.others, &bindings.Items[i])
	}
	return l, nil
}

// poolOf is the run's pool an object labelled with a pool belongs to, -1 for none.
func (w *world) poolOf(obj metav1.Object) int {
	pool, ok := obj.GetLabels()[names.LabelPool]
	if !ok {
		return -1
	}
	for _, p := range w.plan.pools {
		if namespace(p.ns) == obj.GetNamespace() && names.LabelValue(p.name) == pool {
			return p.index
		}
	}
	return -1
}

// invariants checks the live objects against what the harness asked and returns every
// break it finds, one line each.
func (w *world) invariants(ctx context.Context) ([]string, error) {
	l, err := w.read(ctx)
	if err != nil {
		return nil, err
	}
	var breaks []string
	add := func(format string, args ...any) { breaks = append(breaks, fmt.Sprintf(format, args...)) }

	// Exactly one MachineDeployment and one health check per pool; none of a deleted one.
	count := func(kind string, objs []metav1.Object) map[int]metav1.Object {
		by := map[int][]string{}
		one := map[int]metav1.Object{}
		for _, o := range objs {
			if i := w.poolOf(o); i >= 0 {
				by[i] = append(by[i], o.GetName())
				one[i] = o
			}
		}
		for i := range w.exists {
			if len(by[i]) != 1 {
				add("pool %s has %d %ss %v, want 1", w.key(i), len(by[i]), kind, by[i])
			}
		}
		for i := range w.gone {
			if len(by[i]) > 0 {
				add("deleted pool %s left %ss %v", w.key(i), kind, by[i])
			}
		}
		return one
	}
	mds := count("MachineDeployment", metas(l.mds))
	count("MachineHealthCheck", metas(l.mhcs))

	// A deleted pool leaves nothing: no MachineSet, Machine or template of its own.
	for _, o := range append(append(metas(l.sets), metas(l.machines)...), metas(l.templates)...) {
		if i := w.poolOf(o); i >= 0 && w.gone[i] {
			add("deleted pool %s left %s", w.key(i), describe(o))
		}
	}

	// Every template is the MachineDeployment's current one or used by a MachineSet.
	used := map[string]bool{}
	ref := func(ns string, spec clusterv1.MachineSpec) {
		used[ns+"/"+spec.InfrastructureRef.Name] = true
		used[ns+"/"+spec.Bootstrap.ConfigRef.Name] = true
	}
	for _, md := range l.mds {
		ref(md.Namespace, md.Spec.Template.Spec)
	}
	for _, s := range l.sets {
		ref(s.Namespace, s.Spec.Template.Spec)
	}
	for i := range l.templates {
		t := &l.templates[i]
		if w.poolOf(t) >= 0 && !used[t.GetNamespace()+"/"+t.GetName()] {
			add("%s is neither current nor used by a MachineSet", describe(t))
		}
	}

	// Nothing of the operator's in the run's namespaces without an owner (its webhook
	// certificate, in its own namespace, is the release's).
	var own []metav1.Object
	own = append(own, metas(l.mds)...)
	own = append(own, metas(l.mhcs)...)
	own = append(own, metas(l.templates)...)
	own = append(own, metas(l.secrets)...)
	for _, o := range l.others {
		own = append(own, o)
	}
	for _, o := range own {
		if strings.HasPrefix(o.GetNamespace(), "faults-") && o.GetLabels()[names.LabelManagedBy] == names.ManagedByValue && len(o.GetOwnerReferences()) == 0 {
			add("%s of the operator has no owner", describe(o))
		}
	}

	// No MachineDeployment replaced; no Machine of a pool nothing changed replaced.
	got := map[int][]types.UID{}
	for i := range l.machines {
		m := &l.machines[i]
		if p := w.poolOf(m); p >= 0 {
			got[p] = append(got[p], m.UID)
		}
	}
	for i := range w.exists {
		if md, ok := mds[i]; ok && w.mds[i] != "" && md.GetUID() != w.mds[i] {
			add("pool %s: MachineDeployment replaced (%s, was %s)", w.key(i), md.GetUID(), w.mds[i])
		}
		before, seen := w.machines[i]
		if !seen || w.changed[i] {
			continue
		}
		now := sorted(got[i])
		if !slices.Equal(now, before) {
			add("pool %s, which nothing changed: Machines %v, were %v", w.key(i), now, before)
		}
	}

	// No Secret copied twice: one of each kind per owner.
	copies := map[string][]string{}
	for i := range l.secrets {
		s := &l.secrets[i]
		var owners, keys []string
		for _, o := range s.OwnerReferences {
			owners = append(owners, string(o.UID))
		}
		for k := range s.Data {
			keys = append(keys, k)
		}
		sort.Strings(owners)
		sort.Strings(keys)
		k := strings.Join([]string{s.Namespace, strings.Join(owners, ","), string(s.Type), s.Labels[credentials.LabelPullSecretClass], strings.Join(keys, ",")}, "|")
		copies[k] = append(copies[k], s.Name)
	}
	for _, list := range copies {
		if len(list) > 1 {
			add("duplicate Secrets %v", list)
		}
	}

	tokens, err := w.tokens(ctx)
	if err != nil {
		return nil, err
	}
	breaks = append(breaks, tokens...)
	return breaks, nil
}

// tokens checks that the tenant holds exactly the bootstrap tokens the operator keeps
// for each Cluster: those its <cluster>-talos names (the current one, and a rotation's
// next and previous while it runs), none of a Cluster that is not the run's.
func (w *world) tokens(ctx context.Context) ([]string, error) {
	var breaks []string
	// The bootstrap tokens of each tenant cluster, by the UID of the Cluster they are for.
	held := map[*framework.Tenant]map[string][]string{}
	for ns := range w.plan.namespaces() {
		t := w.env.TenantFor(namespace(ns))
		if held[t] != nil || namespace(ns) == w.away {
			continue
		}
		var secrets corev1.SecretList
		if err := t.Client.List(ctx, &secrets, client.InNamespace(metav1.NamespaceSystem), client.HasLabels{tenant.LabelCluster}); err != nil {
			return nil, err
		}
		held[t] = map[string][]string{}
		for _, s := range secrets.Items {
			uid := s.Labels[tenant.LabelCluster]
			held[t][uid] = append(held[t][uid], string(s.Data[bootstrapapi.BootstrapTokenIDKey]))
		}
	}
	for ns := range w.plan.namespaces() {
		if namespace(ns) == w.away {
			continue
		}
		c := &clusterv1.Cluster{}
		if err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace(ns), Name: cluster}, c); err != nil {
			return nil, err
		}
		id := &corev1.Secret{}
		if err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + resolve.TalosSecretSuffix}, id); err != nil {
			if !apierrors.IsNotFound(err) || w.poolsIn(ns) {
				return nil, err
			}
			// No pool yet: no identity, so no token should be held.
		}
		var want []string
		for _, k := range []string{resolve.TalosKeyBootstrapToken, resolve.TalosKeyPreviousBootstrapToken, joinidentity.TalosKeyNextBootstrapToken} {
			if t := string(id.Data[k]); len(t) > 6 {
				want = append(want, t[:6])
			}
		}
		tokens := held[w.env.TenantFor(c.Namespace)]
		uid := string(c.UID)
		if have := sorted(tokens[uid]); !slices.Equal(have, sorted(want)) {
			breaks = append(breaks, fmt.Sprintf("tenant holds tokens %v of cluster %s, the operator keeps %v", have, c.Namespace, sorted(want)))
		}
		delete(tokens, uid)
	}
	for _, tokens := range held {
		for uid, ids := range tokens {
			breaks = append(breaks, fmt.Sprintf("tenant holds tokens %v of a cluster that is not the run's (%s)", ids, uid))
		}
	}
	return breaks, nil
}

// rotationDone: the namespace's rotation has finished: a new current token, no next
// or previous one kept.
func (w *world) rotationDone(ctx context.Context, ns int) error {
	id := &corev1.Secret{}
	if err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace(ns), Name: cluster + resolve.TalosSecretSuffix}, id); err != nil {
		return err
	}
	if _, ok := id.Data[joinidentity.TalosKeyNextBootstrapToken]; ok {
		return fmt.Errorf("rotation in %s: not begun", namespace(ns))
	}
	if _, ok := id.Data[resolve.TalosKeyPreviousBootstrapToken]; ok {
		return fmt.Errorf("rotation in %s: previous token still kept", namespace(ns))
	}
	if string(id.Data[resolve.TalosKeyBootstrapToken]) == w.tokenBefore[ns] {
		return fmt.Errorf("rotation in %s: token not rotated yet", namespace(ns))
	}
	return nil
}

// record keeps each pool's Machine and MachineDeployment UIDs, for the next check to
// compare with, and forgets which pools the last step changed.
func (w *world) record(ctx context.Context) {
	l, err := w.read(ctx)
	if err != nil {
		return
	}
	w.machines = map[int][]types.UID{}
	for i := range l.machines {
		if p := w.poolOf(&l.machines[i]); p >= 0 {
			w.machines[p] = append(w.machines[p], l.machines[i].UID)
		}
	}
	for p, uids := range w.machines {
		w.machines[p] = sorted(uids)
	}
	for i := range w.exists {
		if _, ok := w.machines[i]; !ok {
			w.machines[i] = nil
		}
	}
	for i := range l.mds {
		if p := w.poolOf(&l.mds[i]); p >= 0 {
			w.mds[p] = l.mds[i].UID
		}
	}
	w.changed = map[int]bool{}
}

// poolsIn: some pool of the namespace exists.
func (w *world) poolsIn(ns int) bool {
	for i := range w.exists {
		if w.plan.pools[i].ns == ns {
			return true
		}
	}
	return false
}

func (p *plan) namespaces() map[int]bool {
	out := map[int]bool{}
	for _, pl := range p.pools {
		out[pl.ns] = true
	}
	return out
}

func metas[T any, P interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, 0, len(items))
	for i := range items {
		out = append(out, P(&items[i]))
	}
	return out
}

func describe(o metav1.Object) string {
	kind := fmt.Sprintf("%T", o)
	if u, ok := o.(*unstructured.Unstructured); ok {
		kind = u.GetKind()
	}
	return fmt.Sprintf("%s %s/%s", strings.TrimPrefix(kind, "*"), o.GetNamespace(), o.GetName())
}

func sorted[T ~string](items []T) []T {
	out := slices.Clone(items)
	slices.Sort(out)
	return out
}
