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
	"slices"
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
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/paused"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kamaji"
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
	ReasonTokenConflict    = "TokenConflict"
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
			// A Cluster that is gone never removes its tokens from the tenant: when
			// clusterctl move deleted it here, the tenant is the target's, and keeps
			// joining workers with them.
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !c.DeletionTimestamp.IsZero() || !kamaji.IsControlPlaneOf(c) {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if paused.Cluster(c) {
		// Nothing here or in the tenant: not <cluster>-talos, not a token, even when
		// the Cluster's Talos pools go. clusterctl move deletes them here (the Cluster
		// last) once it made them on the target, whose operator keeps the same token.
		// The pools' Paused condition says so; the Cluster's watch brings it back.
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

	conn, err := r.connect(ctx, c, id.names()...)
	if err != nil {
		st.Reachable, st.ReachableReason, st.ReachableMessage = metav1.ConditionFalse, ReasonUnreachable,
			fmt.Sprintf("the tenant cluster's API server (through Secret %s%s) does not answer: %v", c.Name, tenant.KubeconfigSuffix, err)
		r.Status.Set(key, st)
		return ctrl.Result{}, err // retried with backoff; other clusters are not held
	}
	if conn == nil {
		// Its first read ends with an event that brings the cluster back.
		r.Status.Set(key, st)
		return ctrl.Result{}, nil
	}
	if err := r.syncTokens(ctx, c, conn, id.tokens(), nil); err != nil {
		if conflict, ok := err.(errTokenConflict); ok {
			st.Identity, st.IdentityReason, st.IdentityMessage = metav1.ConditionFalse, ReasonTokenConflict, conflict.Error()
			r.Status.Set(key, st)
			return ctrl.Result{}, nil // a change in the tenant (watched) or to the identity brings it back
		}
		st.Reachable, st.ReachableReason, st.ReachableMessage = metav1.ConditionFalse, ReasonUnreachable,
			fmt.Sprintf("keeping the bootstrap token in the tenant cluster: %v", err)
		r.Status.Set(key, st)
		return ctrl.Result{}, err
	}
	st.Reachable, st.ReachableReason, st.ReachableMessage = metav1.ConditionTrue, ReasonReachable,
		fmt.Sprintf("the tenant cluster's kube-system holds the bootstrap token %s", tokenID(id.current))
	if id.next != "" {
		// The tenant accepts the new token: now the templates may carry it.
		if err := r.promote(ctx, c, id); err != nil {
			return ctrl.Result{}, err
		}
		r.Status.Set(key, st)
		return ctrl.Result{}, nil // the Secret's update brings the cluster back
	}
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

// connect opens (or reuses) the connection to the Cluster's tenant, following the
// token Secrets of these names. It returns nil, without an error, while their first
// read is under way. A connection whose watch failed is asked whether the tenant
// answers now, rather than trusted.
func (r *Reconciler) connect(ctx context.Context, c *clusterv1.Cluster, names ...string) (*tenant.Conn, error) {
	conn, err := r.Conns.Get(ctx, client.ObjectKeyFromObject(c), c.UID)
	if err != nil {
		return nil, err
	}
	conn.Follow(names...)
	if conn.Err() != nil || !conn.HasSynced() {
		if err := conn.Probe(ctx); err != nil {
			return nil, err
		}
	}
	if !conn.HasSynced() {
		return nil, nil
	}
	return conn, nil
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
	var tokens, names []string
	for _, k := range []string{resolve.TalosKeyBootstrapToken, resolve.TalosKeyPreviousBootstrapToken, TalosKeyNextBootstrapToken} {
		if t := string(secret.Data[k]); bootstraputil.IsValidBootstrapToken(t) {
			tokens = append(tokens, t)
			names = append(names, bootstraputil.BootstrapTokenSecretName(tokenID(t)))
		}
	}
	conn, err := r.connect(ctx, c, names...)
	if conn == nil || err != nil {
		return err // a first read brings it back
	}
	if err := r.syncTokens(ctx, c, conn, nil, tokens); err != nil {
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

// labels of what the operator makes: its own, and the cluster's (as Cluster API labels
// a cluster's Secrets).
func ownLabels(cluster string) map[string]string {
	return map[string]string{names.LabelManagedBy: names.ManagedByValue, clusterv1.ClusterNameLabel: cluster}
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
			Labels: map[string]string{tenant.LabelCluster: string(c.UID), names.LabelManagedBy: names.ManagedByValue},
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

// errTokenConflict is a token Secret of the identity's name in the tenant that the
// operator did not make and that does not authenticate as the identity says.
type errTokenConflict struct{ name string }

func (e errTokenConflict) Error() string {
	return fmt.Sprintf("the tenant's kube-system/%s was not made by the operator and does not authenticate the identity's token: "+
		"delete it in the tenant cluster, or rotate the token (a platform's own identity: give it another token)", e.name)
}

// syncTokens makes the tenant hold a Secret for each of tokens, and none of the Secrets
// of the tokens gone that the operator made (for this Cluster, or adoptable), working from the connection's
// cache: an unchanged tenant gets no request. A Secret of a token's name that the
// operator did not make is never changed or deleted: used as is when it authenticates
// the token, else reported (errTokenConflict).
func (r *Reconciler) syncTokens(ctx context.Context, c *clusterv1.Cluster, conn *tenant.Conn, tokens, gone []string) error {
	ctx, cancel := context.WithTimeout(ctx, tenant.RequestTimeout)
	defer cancel()
	secrets := conn.Client.Secrets(metav1.NamespaceSystem)
	for _, t := range tokens {
		d := TokenSecret(c, t)
		cur := conn.Token(d.Name)
		var err error
		switch {
		case cur == nil:
			var made *corev1.Secret
			made, err = secrets.Create(ctx, d, metav1.CreateOptions{FieldManager: names.ManagedByValue})
			if err == nil {
				conn.Wrote(d.Name, made)
			} else if apierrors.IsAlreadyExists(err) {
				err = nil // the watch brings it, and the next reconcile looks at it
			}
		case adoptable(c, cur, d):
			next := cur.DeepCopy()
			next.Labels[tenant.LabelCluster] = string(c.UID)
			next.Type, next.Data = d.Type, d.Data
			var made *corev1.Secret
			if made, err = secrets.Update(ctx, next, metav1.UpdateOptions{FieldManager: names.ManagedByValue}); err == nil {
				conn.Wrote(d.Name, made)
			}
		case !ours(c, cur):
			if !authenticates(cur, d) {
				return errTokenConflict{name: d.Name}
			}
		case !tokenCurrent(cur, d):
			next := cur.DeepCopy()
			next.Type, next.Data = d.Type, d.Data
			var made *corev1.Secret
			if made, err = secrets.Update(ctx, next, metav1.UpdateOptions{FieldManager: names.ManagedByValue}); err == nil {
				conn.Wrote(d.Name, made)
			}
		}
		if err != nil {
			return fmt.Errorf("bootstrap token Secret %s: %w", d.Name, err)
		}
	}
	for _, t := range gone {
		name := bootstraputil.BootstrapTokenSecretName(tokenID(t))
		cur := conn.Token(name)
		if cur == nil || !ours(c, cur) && !adoptable(c, cur, TokenSecret(c, t)) {
			continue
		}
		if err := secrets.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the bootstrap token Secret %s: %w", name, err)
		}
		conn.Wrote(name, nil)
		log.FromContext(ctx).Info("removed a bootstrap token from the tenant cluster", "secret", name)
	}
	return nil
}

// ours tells whether the operator made a tenant Secret, for this Cluster.
func ours(c *clusterv1.Cluster, s *corev1.Secret) bool {
	return s.Labels[tenant.LabelCluster] == string(c.UID) && s.Labels[names.LabelManagedBy] == names.ManagedByValue
}

// adoptable tells whether a tenant Secret the operator made for another Cluster UID
// holds d's token, which this Cluster's identity names: the Cluster was moved by
// clusterctl move and has a new UID on the target, while <cluster>-talos moved with it
// and names the same token. Only a matching token is adopted, so Clusters that share a
// tenant API server never touch each other's tokens.
func adoptable(c *clusterv1.Cluster, cur, d *corev1.Secret) bool {
	return !ours(c, cur) && cur.Labels[names.LabelManagedBy] == names.ManagedByValue &&
		string(cur.Data[bootstrapapi.BootstrapTokenIDKey]) == string(d.Data[bootstrapapi.BootstrapTokenIDKey]) &&
		string(cur.Data[bootstrapapi.BootstrapTokenSecretKey]) == string(d.Data[bootstrapapi.BootstrapTokenSecretKey])
}

// authenticates tells whether a token Secret someone else made lets a node join with
// d's token, as the API server's bootstrap authenticator and the join RBAC see it.
func authenticates(cur, d *corev1.Secret) bool {
	if cur.Type != bootstrapapi.SecretTypeBootstrapToken || string(cur.Data[bootstrapapi.BootstrapTokenUsageAuthentication]) != "true" {
		return false
	}
	for _, k := range []string{bootstrapapi.BootstrapTokenIDKey, bootstrapapi.BootstrapTokenSecretKey} {
		if string(cur.Data[k]) != string(d.Data[k]) {
			return false
		}
	}
	if exp := string(cur.Data[bootstrapapi.BootstrapTokenExpirationKey]); exp != "" {
		if t, err := time.Parse(time.RFC3339, exp); err != nil || !t.After(time.Now()) {
			return false
		}
	}
	return slices.Contains(strings.Split(string(cur.Data[bootstrapapi.BootstrapTokenExtraGroupsKey]), ","), ExtraGroups)
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
