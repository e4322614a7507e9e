// Package autoscaler renders the cluster-autoscaler the operator runs for one tenant
// cluster: a ServiceAccount, a namespaced Role and RoleBinding with what the clusterapi
// provider needs and no more, and a Deployment, all in the Cluster's namespace of the
// management cluster.
//
// The autoscaler sees two clusters, as upstream's "autoscaler running in management
// cluster" topology has it: the management side (MachineDeployments and their scale
// subresource, MachineSets, Machines, MachinePools, machine templates) through its
// ServiceAccount, in-cluster, confined to the namespace; the tenant side (Nodes and
// Pods) through the Cluster's <cluster>-kubeconfig, copied with only its inline server,
// CA and credentials into a Secret of its own and mounted as a file. It
// discovers only that cluster's autoscaled pools: the namespace, the cluster's name and
// names.LabelAutoscaled, which the operator puts on the MachineDeployments (and, through
// their templates, the Machines) of autoscaled pools only.
//
// Objects is pure, like render: the same Input gives the same objects. Golden files hold
// its output.
package autoscaler

import (
	"fmt"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/tenant"
)

const (
	// Suffix names every object of a cluster's autoscaler: <cluster>-autoscaler.
	Suffix = "-autoscaler"
	// KubeconfigMount is where the tenant's kubeconfig is mounted, and KubeconfigFile the
	// file in it.
	KubeconfigMount = "/etc/kubernetes/tenant"
	KubeconfigFile  = "kubeconfig"
	// ContainerName is the autoscaler's container.
	ContainerName = "cluster-autoscaler"
	// Command is the binary in the upstream image.
	Command = "/cluster-autoscaler"
	// MetricsPort is where the autoscaler serves its metrics and /health-check (its
	// --address default).
	MetricsPort = 8085
	// StatusConfigMap is the ConfigMap in the tenant's kube-system where the autoscaler
	// writes what it sees and does (its --status-config-map-name default).
	StatusConfigMap = "cluster-autoscaler-status"
	// StatusNamespace is where the autoscaler keeps its status and its leader lease in
	// the tenant cluster (its --namespace default).
	StatusNamespace = "kube-system"

	// LabelName and LabelInstance mark the autoscaler's objects and Pods.
	LabelName     = "app.kubernetes.io/name"
	LabelInstance = "app.kubernetes.io/instance"
	nameValue     = "cluster-autoscaler"

	// runAs is the unprivileged user the autoscaler runs as: the upstream image is
	// distroless, whose nonroot user this is.
	runAs = 65532
)

// Input is everything the autoscaler of one cluster is made from.
type Input struct {
	// Cluster is the tenant's Cluster; its name and namespace place and name the
	// objects.
	Cluster types.NamespacedName
	// Image is the complete image reference (see Settings.ImageFor).
	Image string
	// TemplateResources are the machine template resources the cluster's pools use
	// (kubevirtmachinetemplates.infrastructure.cluster.x-k8s.io): the autoscaler reads
	// them to size a node group it scales from zero.
	TemplateResources []schema.GroupResource
	// MachineDeployments are the names of the MachineDeployments of the cluster's
	// autoscaled pools: the only ones whose scale the autoscaler may change.
	MachineDeployments []string
	// Settings are the platform's cluster-wide settings.
	Settings Settings
	// Kubeconfig is the tenant's kubeconfig as the autoscaler gets it: the Cluster's
	// <cluster>-kubeconfig reduced to its inline server, CA and credentials
	// (tenant.CleanKubeconfig), in a Secret of the autoscaler's own.
	Kubeconfig []byte
}

// Name is the name of every object of the cluster's autoscaler but its kubeconfig
// Secret, KubeconfigSecretName.
func Name(cluster string) string { return cluster + Suffix }

// KubeconfigSecretName is the Secret holding the autoscaler's tenant kubeconfig.
func KubeconfigSecretName(cluster string) string { return cluster + Suffix + tenant.KubeconfigSuffix }

// Objects are the ServiceAccount, Role, RoleBinding, kubeconfig Secret and Deployment of
// the cluster's autoscaler, in that order (the order they are applied in).
func Objects(in Input) []client.Object {
	name := Name(in.Cluster.Name)
	labels := Labels(in.Cluster.Name)
	meta := func(kind, apiVersion string) (metav1.TypeMeta, metav1.ObjectMeta) {
		return metav1.TypeMeta{Kind: kind, APIVersion: apiVersion},
			metav1.ObjectMeta{Name: name, Namespace: in.Cluster.Namespace, Labels: labels}
	}
	sa := &corev1.ServiceAccount{}
	sa.TypeMeta, sa.ObjectMeta = meta("ServiceAccount", "v1")

	role := &rbacv1.Role{Rules: Rules(in.TemplateResources, in.MachineDeployments)}
	role.TypeMeta, role.ObjectMeta = meta("Role", rbacv1.SchemeGroupVersion.String())

	binding := &rbacv1.RoleBinding{
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: in.Cluster.Namespace}},
	}
	binding.TypeMeta, binding.ObjectMeta = meta("RoleBinding", rbacv1.SchemeGroupVersion.String())

	kubeconfig := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{tenant.KubeconfigKey: in.Kubeconfig}}
	kubeconfig.TypeMeta, kubeconfig.ObjectMeta = meta("Secret", "v1")
	kubeconfig.Name = KubeconfigSecretName(in.Cluster.Name)

	dep := deployment(in, name, labels)
	dep.TypeMeta, dep.ObjectMeta = meta("Deployment", appsv1.SchemeGroupVersion.String())
	return []client.Object{sa, role, binding, kubeconfig, dep}
}

// Labels are the labels of a cluster's autoscaler objects and Pods (apply adds the
// managed-by label to the objects).
func Labels(cluster string) map[string]string {
	return map[string]string{LabelName: nameValue, LabelInstance: names.LabelValue(cluster)}
}

// Rules is exactly what cluster-autoscaler's clusterapi provider does on the management
// side: it watches the scalable resources and Machines through informers, reads and
// patches a MachineDeployment's scale subresource to resize it (only those of the
// cluster's autoscaled pools, by name: not a fixed pool's, not another cluster's of the
// same namespace), reads and updates a Machine to mark it for deletion, and watches the
// machine templates to size a node group at zero. It needs nothing else: no Secrets, no
// Clusters, no deletes.
func Rules(templates []schema.GroupResource, machineDeployments []string) []rbacv1.PolicyRule {
	scaled := slices.Compact(slices.Sorted(slices.Values(machineDeployments)))
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machinedeployments", "machinepools", "machines", "machinesets"}, Verbs: []string{"list", "watch"}},
	}
	if len(scaled) > 0 {
		// Never without names: a rule without resourceNames grants every object.
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machinedeployments/scale"}, Verbs: []string{"get", "patch"}, ResourceNames: scaled})
	}
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machines"}, Verbs: []string{"get", "update"}})
	byGroup := map[string][]string{}
	for _, t := range templates {
		if !slices.Contains(byGroup[t.Group], t.Resource) {
			byGroup[t.Group] = append(byGroup[t.Group], t.Resource)
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		resources := byGroup[g]
		slices.Sort(resources)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: resources, Verbs: []string{"get", "list", "watch"}})
	}
	return rules
}

// Args are the autoscaler's arguments for a cluster.
func Args(in Input) []string {
	s := in.Settings
	// By the tenant label, not clusterName: the pools of a tenant on Proxmox locations run
	// under its satellites there, Clusters of their own in the same namespace (the only
	// one the autoscaler watches), and every MachineDeployment of the tenant carries it.
	discovery := fmt.Sprintf("clusterapi:namespace=%s,%s=%s,%s=%s",
		in.Cluster.Namespace, names.LabelTenantCluster, names.LabelValue(in.Cluster.Name), names.LabelAutoscaled, names.AutoscaledValue)
	args := []string{
		"--cloud-provider=clusterapi",
		"--kubeconfig=" + KubeconfigMount + "/" + KubeconfigFile,
		"--clusterapi-cloud-config-authoritative",
		"--node-group-auto-discovery=" + discovery,
		"--namespace=" + StatusNamespace,
		"--scan-interval=" + s.ScanInterval.Duration.String(),
		"--expander=" + s.Expander,
		"--scale-down-delay-after-add=" + s.ScaleDownDelayAfterAdd.Duration.String(),
		"--scale-down-delay-after-delete=" + s.ScaleDownDelayAfterDelete.Duration.String(),
		"--scale-down-delay-after-failure=" + s.ScaleDownDelayAfterFailure.Duration.String(),
		"--scale-down-unneeded-time=" + s.ScaleDownUnneededTime.Duration.String(),
		"--max-node-provision-time=" + s.MaxNodeProvisionTime.Duration.String(),
		"--unremovable-node-recheck-timeout=" + s.UnremovableNodeRecheckTimeout.Duration.String(),
		"--enforce-node-group-min-size=" + strconv.FormatBool(s.EnforceNodeGroupMinSize),
		"--v=" + strconv.Itoa(s.LogLevel),
	}
	return args
}

func deployment(in Input, name string, labels map[string]string) *appsv1.Deployment {
	s := in.Settings
	var pullSecrets []corev1.LocalObjectReference
	for _, p := range s.Image.PullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: p})
	}
	return &appsv1.Deployment{
		Spec: appsv1.DeploymentSpec{
			// One replica: the autoscaler elects a leader (a lease in the tenant's
			// kube-system), so a rollout's overlap never scales twice.
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:           name,
					AutomountServiceAccountToken: ptr.To(true),
					ImagePullSecrets:             pullSecrets,
					PriorityClassName:            s.PriorityClassName,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](runAs), RunAsGroup: ptr.To[int64](runAs), FSGroup: ptr.To[int64](runAs),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Containers: []corev1.Container{{
						Name:            ContainerName,
						Image:           in.Image,
						ImagePullPolicy: corev1.PullPolicy(s.Image.PullPolicy),
						Command:         []string{Command},
						Args:            Args(in),
						Resources:       s.Resources,
						Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP}},
						// The autoscaler's own health check, as upstream's chart probes it: it
						// fails when the autoscaler's loop has stopped running.
						LivenessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health-check", Port: intstr.FromString("metrics")}},
							InitialDelaySeconds: 30, PeriodSeconds: 30, TimeoutSeconds: 5,
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "tenant-kubeconfig", MountPath: KubeconfigMount, ReadOnly: true}},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](runAs), RunAsGroup: ptr.To[int64](runAs),
							ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
					Volumes: []corev1.Volume{{
						Name: "tenant-kubeconfig",
						VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName:  KubeconfigSecretName(in.Cluster.Name),
							Items:       []corev1.KeyToPath{{Key: tenant.KubeconfigKey, Path: KubeconfigFile}},
							DefaultMode: ptr.To[int32](0o440),
						}},
					}},
				},
			},
		},
	}
}

// ImageReference joins a repository, tag and optional digest.
func ImageReference(repository, tag, digest string) string {
	ref := repository + ":" + tag
	if digest != "" {
		ref += "@" + digest
	}
	return ref
}
