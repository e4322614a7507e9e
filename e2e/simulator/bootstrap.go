package simulator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"
)

// bootstrapData computes a config's bootstrap data for its Machine, as the provider would.
type bootstrapData func(cfg *unstructured.Unstructured, m *clusterv1.Machine) ([]byte, error)

// addBootstrap plays a bootstrap provider for one config kind: once the owning Machine
// exists, the data Secret and the config's status.
func (s *sim) addBootstrap(mgr ctrl.Manager, gvk schema.GroupVersionKind, data bootstrapData) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simulator-"+strings.ToLower(gvk.Kind)).
		For(newObject(gvk)).
		Owns(&corev1.Secret{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return refRequest(o.GetNamespace(), o.(*clusterv1.Machine).Spec.Bootstrap.ConfigRef, gvk)
		})).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, s.reconcileBootstrap(ctx, req, gvk, data)
		}))
}

func (s *sim) reconcileBootstrap(ctx context.Context, req reconcile.Request, gvk schema.GroupVersionKind, data bootstrapData) error {
	cfg, err := s.get(ctx, gvk, req.Namespace, req.Name)
	if cfg == nil || err != nil || !cfg.GetDeletionTimestamp().IsZero() {
		return err
	}
	m, err := s.ownerMachine(ctx, cfg)
	if m == nil || err != nil {
		return err // no owner yet: the update that adds it brings us back
	}
	value, err := data(cfg, m)
	if err != nil {
		s.refuse(ctx, m, "BootstrapDataRefused", fmt.Errorf("%s %s: %w", gvk.Kind, cfg.GetName(), err))
		return nil
	}
	if err := s.ensureSecret(ctx, cfg, cfg.GetName(), m.Spec.ClusterName, value); err != nil {
		return err
	}
	// Both contract forms where the kind's schema has them: status.ready (v1beta1) and
	// status.initialization.dataSecretCreated (v1beta2, KairosConfig only).
	fields := map[string]any{"status.ready": true, "status.dataSecretName": cfg.GetName()}
	if gvk == KairosConfigGVK {
		fields["status.initialization.dataSecretCreated"] = true
	}
	return s.patch(ctx, cfg, true, func() error { return setFields(cfg, fields) })
}

// talosData is CABPT with generateType none: the machine config in spec.data, as is.
func (s *sim) talosData(cfg *unstructured.Unstructured, _ *clusterv1.Machine) ([]byte, error) {
	spec, _, _ := unstructured.NestedMap(cfg.Object, "spec")
	if t := spec["generateType"]; t != "none" {
		return nil, fmt.Errorf("generateType %v is not simulated (only none)", t)
	}
	for _, f := range []string{"configPatches", "strategicPatches", "hostname"} {
		if _, ok := spec[f]; ok {
			return nil, fmt.Errorf("spec.%s is not simulated", f)
		}
	}
	data, _ := spec["data"].(string)
	if data == "" {
		return nil, errors.New("spec.data is empty, and generateType none needs it")
	}
	return []byte(data), nil
}

// kairosSpec is the part of a KairosConfig spec a kubeadm worker's cloud-config carries.
type kairosSpec struct {
	Role         string           `json:"role"`
	Distribution string           `json:"distribution"`
	Hostname     string           `json:"hostname"`
	UserName     string           `json:"userName"`
	UserGroups   []string         `json:"userGroups"`
	GithubUser   string           `json:"githubUser"`
	SSHPublicKey string           `json:"sshPublicKey"`
	DNSServers   []string         `json:"dnsServers"`
	Files        []map[string]any `json:"files"`
	Kubeadm      struct {
		JoinConfiguration map[string]any `json:"joinConfiguration"`
	} `json:"kubeadm"`
}

// kairosData is the Kairos provider's kubeadm worker cloud-config, reduced to what a
// worker's OS and kubelet read (see the package documentation).
func (s *sim) kairosData(cfg *unstructured.Unstructured, m *clusterv1.Machine) ([]byte, error) {
	raw, _, _ := unstructured.NestedMap(cfg.Object, "spec")
	var spec kairosSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, err
	}
	switch {
	case spec.Distribution != "kubeadm":
		return nil, fmt.Errorf("distribution %q is not simulated (only kubeadm)", spec.Distribution)
	case spec.Role != "worker":
		return nil, fmt.Errorf("role %q: kubeadm joins workers only", spec.Role)
	case m.Spec.Version == "":
		return nil, fmt.Errorf("kubeadm requires Machine.spec.version")
	}

	// What the provider sets in the join: the node name and the uninitialized taint.
	join := map[string]any{}
	if spec.Kubeadm.JoinConfiguration != nil {
		join = runtime.DeepCopyJSON(spec.Kubeadm.JoinConfiguration)
	}
	reg, _ := join["nodeRegistration"].(map[string]any)
	if reg == nil {
		reg = map[string]any{}
	}
	if name, _ := reg["name"].(string); name == "" {
		reg["name"] = m.Name
	}
	taints, _ := reg["taints"].([]any)
	uninitialized := false
	for _, t := range taints {
		if t, _ := t.(map[string]any); t["key"] == clusterv1.NodeUninitializedTaint.Key {
			uninitialized = true
		}
	}
	if !uninitialized {
		taints = append(taints, map[string]any{"key": clusterv1.NodeUninitializedTaint.Key, "effect": string(clusterv1.NodeUninitializedTaint.Effect)})
	}
	reg["taints"] = taints
	join["nodeRegistration"] = reg
	kubeadm, err := yaml.Marshal(map[string]any{
		"clusterConfiguration": map[string]any{"kubernetesVersion": m.Spec.Version},
		"joinConfiguration":    join,
	})
	if err != nil {
		return nil, err
	}

	user := map[string]any{"name": cmp.Or(spec.UserName, "kairos"), "groups": spec.UserGroups}
	if len(spec.UserGroups) == 0 {
		user["groups"] = []string{"admin"}
	}
	var keys []string
	if spec.GithubUser != "" {
		keys = append(keys, "github:"+spec.GithubUser)
	}
	if spec.SSHPublicKey != "" {
		keys = append(keys, spec.SSHPublicKey)
	}
	if keys != nil {
		user["ssh_authorized_keys"] = keys
	}
	doc := map[string]any{
		"hostname": cmp.Or(spec.Hostname, m.Name),
		"users":    []any{user},
		"cluster":  map[string]any{"role": "worker", "config": string(kubeadm)},
	}
	if len(spec.DNSServers) > 0 {
		doc["stages"] = map[string]any{"boot": []any{map[string]any{
			"name": "Configure DNS resolvers for early boot",
			"dns":  map[string]any{"nameservers": spec.DNSServers, "path": "/etc/resolv.conf"},
		}}}
	}
	if len(spec.Files) > 0 {
		doc["write_files"] = spec.Files
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), out...), nil
}

// refuse reports what a provider or a kubelet would refuse, on the Machine and in the
// log; it is not retried (the objects it is computed from do not change).
func (s *sim) refuse(ctx context.Context, m *clusterv1.Machine, reason string, err error) {
	log.FromContext(ctx).Error(err, "simulated provider refuses", "machine", client.ObjectKeyFromObject(m), "reason", reason)
	s.events.Eventf(m, nil, corev1.EventTypeWarning, reason, "Simulate", "%v", err)
}

// newObject is an empty object of a provider kind.
func newObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	return obj
}

// refRequest is the request for the object a contract reference names, if it is of kind gvk.
func refRequest(ns string, ref clusterv1.ContractVersionedObjectReference, gvk schema.GroupVersionKind) []reconcile.Request {
	if ref.APIGroup != gvk.Group || ref.Kind != gvk.Kind || ref.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: ref.Name}}}
}
