// Package kairos holds the parts of the Kairos Cluster API bootstrap provider's API
// (bootstrap.cluster.x-k8s.io/v1beta2, the kubeadm-capable version after v0.1.3) that
// this operator writes. Only the fields we render are declared; the integration tests
// apply them to the upstream CRD with strict field validation.
//
// +kubebuilder:object:generate=true
// +groupName=bootstrap.cluster.x-k8s.io
package kairos

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of the KairosConfigTemplate we render.
var GroupVersion = schema.GroupVersion{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2"}

// KairosConfigTemplate is a template of Kairos bootstrap configs for a MachineDeployment.
//
// +kubebuilder:object:root=true
type KairosConfigTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              KairosConfigTemplateSpec `json:"spec"`
}

// KairosConfigTemplateSpec holds the template.
type KairosConfigTemplateSpec struct {
	Template KairosConfigTemplateResource `json:"template"`
}

// KairosConfigTemplateResource is the KairosConfig each Machine gets.
type KairosConfigTemplateResource struct {
	Spec KairosConfigSpec `json:"spec"`
}

// KairosConfigSpec is the bootstrap config of one machine.
type KairosConfigSpec struct {
	// Role is always "worker": kubeadm joins are worker-only.
	Role string `json:"role"`
	// Distribution is "kubeadm"; the provider defaults to k0s, so it is always set.
	Distribution string `json:"distribution"`
	// KubernetesVersion must equal the Machine's version and the image's kubeadm.
	KubernetesVersion string `json:"kubernetesVersion"`
	// UserName of the worker user.
	UserName string `json:"userName,omitempty"`
	// UserPasswordSecretRef names a Secret with a random password nobody is shown.
	UserPasswordSecretRef *SecretKeyRef `json:"userPasswordSecretRef,omitempty"`
	// SSHPublicKey is the class's key: the only way into the worker.
	SSHPublicKey string `json:"sshPublicKey,omitempty"`
	// DNSServers are the resolvers for early boot (the management cluster's DNS).
	DNSServers []string `json:"dnsServers,omitempty"`
	// Files are written to the node: data, never scripts.
	Files []File `json:"files,omitempty"`
	// Kubeadm holds the join configuration.
	Kubeadm *Kubeadm `json:"kubeadm,omitempty"`
}

// SecretKeyRef names a key of a Secret in the KairosConfig's namespace.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
}

// File is a file written to the node.
type File struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Owner       string `json:"owner,omitempty"`
	Permissions string `json:"permissions,omitempty"`
}

// Kubeadm holds the kubeadm join inputs the operator sets. The provider owns discovery,
// the node name, the uninitialized taint and the providerID patch.
type Kubeadm struct {
	JoinConfiguration JoinConfiguration `json:"joinConfiguration"`
}

// JoinConfiguration is CAPI's kubeadm v1beta2 JoinConfiguration, the fields we set.
type JoinConfiguration struct {
	// NodeRegistration is left out when empty: the CRD wants at least one field in it.
	NodeRegistration *NodeRegistration `json:"nodeRegistration,omitempty"`
	Patches          *Patches          `json:"patches,omitempty"`
}

// NodeRegistration is how the node registers.
type NodeRegistration struct {
	KubeletExtraArgs []Arg   `json:"kubeletExtraArgs,omitempty"`
	Taints           []Taint `json:"taints,omitempty"`
}

// Arg is a kubelet flag.
type Arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Taint is a taint the kubelet registers.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Patches points kubeadm at a directory of patch files.
type Patches struct {
	Directory string `json:"directory"`
}

// KairosConfigTemplateList is a list of KairosConfigTemplate.
//
// +kubebuilder:object:root=true
type KairosConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KairosConfigTemplate `json:"items"`
}

// AddToScheme registers the kinds of this package.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &KairosConfigTemplate{}, &KairosConfigTemplateList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
