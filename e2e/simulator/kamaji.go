package simulator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// What kubeadm's bootstrap-token phase sets up for joins, which Kamaji runs against every
// tenant: the names are kubeadm's (k8s.io/kubernetes/cmd/kubeadm/app/constants and
// .../phases/bootstraptoken/clusterinfo, which cannot be imported), at v1.35.
const (
	// NodeBootstrapTokenAuthGroup: the group kubeadm's bootstrap tokens authenticate in
	// (their auth-extra-groups).
	nodeBootstrapTokenAuthGroup = "system:bootstrappers:kubeadm:default-node-token"
	// NodesGroup.
	nodesGroup = "system:nodes"
	// NodeKubeletBootstrap binds NodeBootstrapperClusterRoleName: bootstrap tokens may
	// post CSRs.
	nodeKubeletBootstrap            = "kubeadm:kubelet-bootstrap"
	nodeBootstrapperClusterRoleName = "system:node-bootstrapper"
	// GetNodesClusterRoleName: bootstrap tokens may get Nodes (kubeadm join checks for a
	// Node of the same name).
	getNodesClusterRoleName = "kubeadm:get-nodes"
	// NodeAutoApproveBootstrapClusterRoleBinding binds CSRAutoApprovalClusterRoleName:
	// the csrapproving controller approves bootstrap tokens' node client CSRs.
	nodeAutoApproveBootstrapClusterRoleBinding = "kubeadm:node-autoapprove-bootstrap"
	csrAutoApprovalClusterRoleName             = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	// NodeAutoApproveCertificateRotationClusterRoleBinding binds
	// NodeSelfCSRAutoApprovalClusterRoleName: Nodes renew their own client certificates.
	nodeAutoApproveCertificateRotationClusterRoleBinding = "kubeadm:node-autoapprove-certificate-rotation"
	nodeSelfCSRAutoApprovalClusterRoleName               = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
	// clusterinfo.BootstrapSignerClusterRoleName: anonymous may read cluster-info.
	bootstrapSignerClusterRoleName = "kubeadm:bootstrap-signer-clusterinfo"
	// user.Anonymous.
	anonymousUser = "system:anonymous"
)

// kamajiManager is the field manager of what the simulated Kamaji applies in a tenant.
const kamajiManager = "kamaji"

// prepareTenant sets up, once per tenant API server, what Kamaji's kubeadm phases set up
// for joins: the bootstrapper RBAC and kube-public/cluster-info (the tenant's server and
// CA, which the controller-manager's bootstrapsigner signs with each token).
func (s *sim) prepareTenant(ctx context.Context, t Tenant) error {
	server, err := kubeconfigServer(t.Kubeconfig)
	if err != nil {
		return err
	}
	s.mu.Lock()
	done := s.prepared[server]
	s.mu.Unlock()
	if done {
		return nil
	}
	cs, err := s.remotes.forKubeconfig(t.Kubeconfig, agentKamaji)
	if err != nil {
		return err
	}
	if err := applyJoinRBAC(ctx, cs); err != nil {
		return fmt.Errorf("the tenant's bootstrap RBAC: %w", err)
	}
	info, err := clientcmd.Write(clientcmdapi.Config{Clusters: map[string]*clientcmdapi.Cluster{
		"": {Server: server, CertificateAuthorityData: t.CACert},
	}})
	if err != nil {
		return err
	}
	// Applied, not updated: the signatures bootstrapsigner adds to it are its own fields.
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Apply(ctx,
		corev1apply.ConfigMap(bootstrapapi.ConfigMapClusterInfo, metav1.NamespacePublic).
			WithData(map[string]string{bootstrapapi.KubeConfigKey: string(info)}),
		metav1.ApplyOptions{FieldManager: kamajiManager, Force: true}); err != nil {
		return fmt.Errorf("the tenant's cluster-info: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prepared == nil {
		s.prepared = map[string]bool{}
	}
	s.prepared[server] = true
	return nil
}

// applyJoinRBAC is kubeadm's node.AllowBootstrapTokensToPostCSRs,
// AllowBootstrapTokensToGetNodes, AutoApproveNodeBootstrapTokens,
// AutoApproveNodeCertificateRotation and clusterinfo.CreateClusterInfoRBACRules.
func applyJoinRBAC(ctx context.Context, cs kubernetes.Interface) error {
	opts := metav1.ApplyOptions{FieldManager: kamajiManager, Force: true}
	bindGroup := func(name, role, group string) error {
		_, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1apply.ClusterRoleBinding(name).
			WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(role)).
			WithSubjects(rbacv1apply.Subject().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Group").WithName(group)), opts)
		return err
	}
	if _, err := cs.RbacV1().ClusterRoles().Apply(ctx, rbacv1apply.ClusterRole(getNodesClusterRoleName).
		WithRules(rbacv1apply.PolicyRule().WithAPIGroups("").WithResources("nodes").WithVerbs("get")), opts); err != nil {
		return err
	}
	for _, b := range [][3]string{
		{nodeKubeletBootstrap, nodeBootstrapperClusterRoleName, nodeBootstrapTokenAuthGroup},
		{getNodesClusterRoleName, getNodesClusterRoleName, nodeBootstrapTokenAuthGroup},
		{nodeAutoApproveBootstrapClusterRoleBinding, csrAutoApprovalClusterRoleName, nodeBootstrapTokenAuthGroup},
		{nodeAutoApproveCertificateRotationClusterRoleBinding, nodeSelfCSRAutoApprovalClusterRoleName, nodesGroup},
	} {
		if err := bindGroup(b[0], b[1], b[2]); err != nil {
			return err
		}
	}
	if _, err := cs.RbacV1().Roles(metav1.NamespacePublic).Apply(ctx,
		rbacv1apply.Role(bootstrapSignerClusterRoleName, metav1.NamespacePublic).WithRules(rbacv1apply.PolicyRule().
			WithAPIGroups("").WithResources("configmaps").WithVerbs("get").WithResourceNames(bootstrapapi.ConfigMapClusterInfo)),
		opts); err != nil {
		return err
	}
	_, err := cs.RbacV1().RoleBindings(metav1.NamespacePublic).Apply(ctx,
		rbacv1apply.RoleBinding(bootstrapSignerClusterRoleName, metav1.NamespacePublic).
			WithRoleRef(rbacv1apply.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(bootstrapSignerClusterRoleName)).
			WithSubjects(rbacv1apply.Subject().WithAPIGroup("rbac.authorization.k8s.io").WithKind("User").WithName(anonymousUser)), opts)
	return err
}

// kamajiSecrets writes what the Kamaji control-plane provider replicates from the tenant
// control plane for Cluster API (createOrUpdateKubeconfig and
// createOrUpdateCertificateAuthority): <cluster>-kubeconfig (the admin kubeconfig under
// "value") and <cluster>-ca (tls.crt and tls.key), both cluster.x-k8s.io/secret,
// labelled as Kamaji labels them and controlled by the KamajiControlPlane.
func (s *sim) kamajiSecrets(ctx context.Context, c *clusterv1.Cluster, kcp *unstructured.Unstructured, t Tenant) error {
	labels := func(secret string) map[string]string {
		return map[string]string{
			clusterv1.ClusterNameLabel:    c.Name,
			"kamaji.clastix.io/component": "capi",
			"kamaji.clastix.io/secret":    secret,
			"kamaji.clastix.io/cluster":   c.Name,
			"kamaji.clastix.io/tcp":       kcp.GetName(), // the TenantControlPlane has the KamajiControlPlane's name
		}
	}
	if err := s.ensureSecret(ctx, kcp, c.Name+kubeconfigSuffix, labels("kubeconfig"), map[string][]byte{dataKey: t.Kubeconfig}); err != nil {
		return err
	}
	return s.ensureSecret(ctx, kcp, c.Name+caSuffix, labels("ca"),
		map[string][]byte{corev1.TLSCertKey: t.CACert, corev1.TLSPrivateKeyKey: t.CAKey})
}
