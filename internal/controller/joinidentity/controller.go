// Package joinidentity gives every tenant cluster's Talos workers the identity they
// join with. For each Cluster with a Kamaji control plane and at least one Talos pool
// it makes the Secret <cluster>-talos once, from Cluster API's <cluster>-ca (the
// tenant's Kubernetes CA) and secrets the Talos machinery generates, and keeps the
// bootstrap token it names in the tenant cluster's kube-system, reached through
// <cluster>-kubeconfig as Cluster API reaches it.
//
// A Secret <cluster>-talos the operator did not make (a platform's own) is used as is
// and never changed. One the operator made changes only when asked: the annotation
// AnnotationRotate on the Cluster mints a new bootstrap token; the old one stays valid
// in the tenant until every Talos pool of the cluster has rolled onto templates that
// carry the new one. The token leaves the tenant with the cluster's last Talos pool.
package joinidentity

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/controlplanedns"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

const (
	// AnnotationRotate, on a Cluster, asks for a new bootstrap token: set it to a new
	// value (a date will do) to rotate once more. Every Talos pool of the cluster rolls.
	AnnotationRotate = "nodegroup.io/rotate-bootstrap-token"
	// annotationRotated, on <cluster>-talos, is the AnnotationRotate value last acted on.
	annotationRotated = "nodegroup.io/bootstrap-token-rotated-for"

	// ExtraGroups is the group a node's bootstrap token authenticates into: the group
	// the tenant's bootstrapper RBAC (kubeadm's, which Kamaji sets up) binds to node
	// client certificate requests and their auto-approval.
	ExtraGroups = "system:bootstrappers:kubeadm:default-node-token"

	// rotationPoll is how often a rotation in flight checks whether the pools rolled.
	rotationPoll = 10 * time.Second
	// caPoll is how often a cluster whose <cluster>-ca is missing is looked at again,
	// besides the Secret's own event.
	caPoll = 30 * time.Second
)

// Condition reasons of the pools' TalosIdentityReady and TenantClusterReachable.
const (
	ReasonMinted           = "Minted"
	ReasonPlatformProvided = "PlatformProvided"
	ReasonRotating         = "Rotating"
	ReasonWaitingForCA     = "WaitingForClusterCA"
	ReasonInvalidIdentity  = "InvalidIdentity"
	ReasonReachable        = "Reachable"
	ReasonUnreachable      = "Unreachable"
)

// Reconciler keeps the Talos join identity of Clusters.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Conns     *tenant.Connections
	Status    *tenant.Status
	Recorder  events.EventRecorder
	// Now is the clock of minted certificates; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	// retired holds the Clusters whose tokens this process removed from the tenant
	// after their last Talos pool went, so it is done once, not on every resync.
	retired map[types.NamespacedName]types.UID
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets;machinedeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=talosconfigtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete

// Reconcile brings one Cluster's Talos identity and its tenant-side token in line.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !c.DeletionTimestamp.IsZero() || !kamaji(c) {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	pools, err := r.talosPools(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pools == 0 {
		return ctrl.Result{}, r.retire(ctx, c)
	}
	r.setRetired(req.NamespacedName, "")
	return r.keep(ctx, c)
}

// keep makes sure of the identity Secret, then of its tokens in the tenant.
func (r *Reconciler) keep(ctx context.Context, c *clusterv1.Cluster) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(c)
	st := tenant.State{}
	if old, ok := r.Status.Get(key); ok {
		st.Reachable, st.ReachableReason, st.ReachableMessage = old.Reachable, old.ReachableReason, old.ReachableMessage
	}
	id, result, err := r.identity(ctx, c, &st)
	if id == nil {
		r.Status.Set(key, st)
		return result, err
	}

	conn, err := r.Conns.Get(ctx, key, c.UID)
	if err == nil && (!conn.HasSynced() || conn.Err() != nil) {
		// The cache is not filled yet or its watch broke: ask the API server whether it
		// answers now, rather than trust what the cache holds.
		err = conn.Probe(ctx)
	}
	if err != nil {
		st.Reachable, st.ReachableReason, st.ReachableMessage = metav1.ConditionFalse, ReasonUnreachable,
			fmt.Sprintf("the tenant cluster's API server (through Secret %s%s) does not answer: %v", c.Name, tenant.KubeconfigSuffix, err)
		r.Status.Set(key, st)
		return ctrl.Result{}, err // retried with backoff; other clusters are not held
	}
	if !conn.HasSynced() {
		// Its first fill ends with an event that brings the cluster back.
		r.Status.Set(key, st)
		return ctrl.Result{}, nil
	}
	if err := r.syncTokens(ctx, c, conn, id.tokens()); err != nil {
		st.Reachable, st.ReachableReason, st.ReachableMessage = metav1.ConditionFalse, ReasonUnreachable,
			fmt.Sprintf("keeping the bootstrap token in the tenant cluster: %v", err)
		r.Status.Set(key, st)
		return ctrl.Result{}, err
	}
	st.Reachable, st.ReachableReason, st.ReachableMessage = metav1.ConditionTrue, ReasonReachable,
		fmt.Sprintf("the tenant cluster's kube-system holds the bootstrap token %s", tokenID(id.current))
	if id.previous == "" {
		r.Status.Set(key, st)
		return result, nil
	}
	done, waiting, err := r.rolled(ctx, c, id)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !done {
		st.IdentityMessage += "; " + waiting
		r.Status.Set(key, st)
		return ctrl.Result{RequeueAfter: rotationPoll}, nil
	}
	if err := r.finishRotation(ctx, c, conn, id); err != nil {
		return ctrl.Result{}, err
	}
	r.Status.Set(key, st)
	// The Secret's update brings the cluster back with the rotation done.
	return ctrl.Result{}, nil
}

// forget drops what this process holds for a Cluster that is gone or no longer
// concerns it (deleted, or not on a Kamaji control plane). Its Secrets go with the
// Cluster through their owner reference; its tenant goes with its control plane.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.Conns.Close(key)
	r.Status.Forget(key)
	r.setRetired(key, "")
}

// retire removes the cluster's tokens from the tenant once its last Talos pool is gone,
// and closes the connection. <cluster>-talos stays: a new Talos pool joins with the
// same identity.
func (r *Reconciler) retire(ctx context.Context, c *clusterv1.Cluster) error {
	key := client.ObjectKeyFromObject(c)
	r.Status.Forget(key)
	if r.wasRetired(key, c.UID) {
		return nil
	}
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name + resolve.TalosSecretSuffix}, secret)
	if apierrors.IsNotFound(err) {
		// No identity, so no token was ever kept for it.
		r.Conns.Close(key)
		return nil
	}
	if err != nil {
		return err
	}
	conn, err := r.Conns.Get(ctx, key, c.UID)
	if err != nil {
		return err
	}
	if !conn.HasSynced() {
		// Its first fill ends with an event that brings the cluster back.
		return conn.Probe(ctx)
	}
	if err := r.syncTokens(ctx, c, conn, nil); err != nil {
		return err
	}
	r.Conns.Close(key)
	r.setRetired(key, c.UID)
	return nil
}

func (r *Reconciler) wasRetired(key types.NamespacedName, uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retired[key] == uid
}

// setRetired records a retired cluster; an empty uid forgets it.
func (r *Reconciler) setRetired(key types.NamespacedName, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid == "" {
		delete(r.retired, key)
		return
	}
	if r.retired == nil {
		r.retired = map[types.NamespacedName]types.UID{}
	}
	r.retired[key] = uid
}

// talosPools counts the cluster's pools on a Talos class that are not being deleted.
func (r *Reconciler) talosPools(ctx context.Context, c *clusterv1.Cluster) (int, error) {
	var pools v1.NodeGroupList
	if err := r.Client.List(ctx, &pools, client.InNamespace(c.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	n := 0
	for i := range pools.Items {
		p := &pools.Items[i]
		if p.Spec.ClusterName != c.Name || !p.DeletionTimestamp.IsZero() {
			continue
		}
		spec, ok := resolve.BuiltinClass(p.Spec.NodeGroupClassName)
		if !ok {
			class := &v1.NodeGroupClass{}
			if err := r.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeGroupClassName}, class); err != nil {
				continue // an unknown class is the pool's condition, not this controller's
			}
			spec = class.Spec
		}
		if spec.OS == v1.OSTalos {
			n++
		}
	}
	return n, nil
}

// kamaji tells whether the Cluster's control plane is a KamajiControlPlane.
func kamaji(c *clusterv1.Cluster) bool {
	ref := c.Spec.ControlPlaneRef
	gk := controlplanedns.KamajiControlPlaneGVK.GroupKind()
	return ref.APIGroup == gk.Group && ref.Kind == gk.Kind
}

// labels of what the operator makes: its own, and the cluster's (as Cluster API labels
// a cluster's Secrets).
func ownLabels(cluster string) map[string]string {
	return map[string]string{render.LabelManagedBy: render.ManagedByValue, clusterv1.ClusterNameLabel: cluster}
}

// tokenID is the public half of a bootstrap token.
func tokenID(token string) string {
	id, _, _ := strings.Cut(token, ".")
	return id
}

// TokenSecret is the tenant's Secret for a bootstrap token, as kubeadm makes one for
// node joins, without an expiry: the token lives as long as the cluster's Talos pools.
func TokenSecret(c *clusterv1.Cluster, token string) *corev1.Secret {
	id, secret, _ := strings.Cut(token, ".")
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(id),
			Labels: map[string]string{tenant.LabelCluster: string(c.UID), render.LabelManagedBy: render.ManagedByValue},
		},
		Type: bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:               []byte(id),
			bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
			bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(ExtraGroups),
			bootstrapapi.BootstrapTokenDescriptionKey:      []byte("Talos worker join token, kept by nodegroup-operator for this cluster's Talos pools"),
		},
	}
}

// syncTokens makes the tenant hold exactly the Secrets of tokens among the cluster's
// bootstrap token Secrets (those with its label), creating, correcting and deleting
// from the connection's cache: an unchanged tenant gets no request.
func (r *Reconciler) syncTokens(ctx context.Context, c *clusterv1.Cluster, conn *tenant.Conn, tokens []string) error {
	secrets := conn.Client.Secrets(metav1.NamespaceSystem)
	want := map[string]bool{}
	for _, t := range tokens {
		d := TokenSecret(c, t)
		want[d.Name] = true
		cur := conn.Token(d.Name)
		var err error
		switch {
		case cur == nil:
			_, err = secrets.Create(ctx, d, metav1.CreateOptions{FieldManager: render.ManagedByValue})
			if apierrors.IsAlreadyExists(err) {
				// A Secret of that name without the cluster's label: the token the identity
				// names, made by someone else. It is taken over, so it is kept in step.
				var live *corev1.Secret
				if live, err = secrets.Get(ctx, d.Name, metav1.GetOptions{}); err == nil {
					d.ResourceVersion = live.ResourceVersion
					_, err = secrets.Update(ctx, d, metav1.UpdateOptions{FieldManager: render.ManagedByValue})
				}
			}
		case !tokenCurrent(cur, d):
			next := cur.DeepCopy()
			next.Type, next.Data = d.Type, d.Data
			for k, v := range d.Labels {
				next.Labels[k] = v
			}
			_, err = secrets.Update(ctx, next, metav1.UpdateOptions{FieldManager: render.ManagedByValue})
		}
		if err != nil {
			return fmt.Errorf("bootstrap token Secret %s: %w", d.Name, err)
		}
	}
	for _, s := range conn.Tokens() {
		if want[s.Name] {
			continue
		}
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the bootstrap token Secret %s: %w", s.Name, err)
		}
		log.FromContext(ctx).Info("removed a bootstrap token from the tenant cluster", "secret", s.Name)
	}
	return nil
}

// tokenCurrent tells whether the tenant's token Secret cur authenticates as d says.
func tokenCurrent(cur, d *corev1.Secret) bool {
	if cur.Type != d.Type || len(cur.Data) != len(d.Data) {
		return false
	}
	for k, v := range d.Data {
		if string(cur.Data[k]) != string(v) {
			return false
		}
	}
	return true
}
