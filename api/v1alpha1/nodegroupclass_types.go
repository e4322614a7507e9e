package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeGroupClassSpec says how a worker is built and how it boots. It is immutable: a new
// image or release is a new class, so no single edit can roll every pool at once.
//
// +kubebuilder:validation:XValidation:rule="!has(self.image) || self.os == 'Kairos'",message="spec.image is only for os Kairos; Talos disks come from the Image Factory"
// +kubebuilder:validation:XValidation:rule="!has(self.talos) || self.os == 'Talos'",message="spec.talos is only for os Talos"
// +kubebuilder:validation:XValidation:rule="!has(self.kairos) || self.os == 'Kairos'",message="spec.kairos is only for os Kairos"
type NodeGroupClassSpec struct {
	// os is the operating system of the workers: Talos or Kairos.
	// +required
	OS OSFamily `json:"os"`

	// image is the worker disk of a Kairos class, pinned by digest. A class with an image
	// fixes the Kubernetes release of its pools, so a platform patch bump does not roll
	// them. Without it, the pool's Kubernetes minor selects the platform-built disk.
	// +optional
	Image *ClassImage `json:"image,omitempty"`

	// talos customises the Talos system of a Talos class.
	// +optional
	Talos *TalosClassSpec `json:"talos,omitempty"`

	// kairos customises the Kairos system of a Kairos class.
	// +optional
	Kairos *KairosClassSpec `json:"kairos,omitempty"`

	// imagePullSecretRef names a registry credential for the worker disk. The operator
	// keeps a copy in each tenant namespace that has a pool on this class; tenants never
	// read the source.
	// +optional
	ImagePullSecretRef *SecretReference `json:"imagePullSecretRef,omitempty"`

	// poolRules are CEL expressions every pool naming this class must satisfy, checked at
	// admission and before every render. The pool is the variable `object`.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	PoolRules []PoolRule `json:"poolRules,omitempty"`
}

// ClassImage is a worker disk pinned by digest, and the Kubernetes release built into it.
type ClassImage struct {
	// reference is the disk image, pinned by digest: `registry/repository@sha256:<64 hex>`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)+@sha256:[a-f0-9]{64}$')",message="spec.image.reference must be pinned by digest, as registry/repository@sha256:<64 lowercase hex>"
	Reference string `json:"reference"`

	// kubernetesVersion is the full release (vMAJOR.MINOR.PATCH) of the kubelet and
	// kubeadm inside the image.
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^v[0-9]+[.][0-9]+[.][0-9]+$')",message="spec.image.kubernetesVersion must be a full release such as v1.35.4"
	KubernetesVersion string `json:"kubernetesVersion"`
}

// TalosClassSpec customises the Talos system of a class.
type TalosClassSpec struct {
	// extensions are Talos system extensions baked into the image through the Image
	// Factory schematic, such as siderolabs/nvidia-container-toolkit-lts.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9][-a-z0-9./]*[a-z0-9]$`
	Extensions []string `json:"extensions,omitempty"`

	// kernelArgs are extra kernel arguments of the schematic.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[-A-Za-z0-9_.,=:/]+$`
	KernelArgs []string `json:"kernelArgs,omitempty"`

	// installerRepository is where the Talos installer and disk images are pulled from,
	// without tag or digest. Defaults to the public Image Factory.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)+$`
	InstallerRepository string `json:"installerRepository,omitempty"`
}

// KairosClassSpec customises the Kairos system of a class.
type KairosClassSpec struct {
	// sshAuthorizedKey is the public key of the worker user: the only way into a Kairos
	// worker. Without it the user's password is random and shown to nobody.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521|sk-ssh-ed25519@openssh.com) [A-Za-z0-9+/=]+( [^\n\r]*)?$`
	SSHAuthorizedKey string `json:"sshAuthorizedKey,omitempty"`
}

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// namespace of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PoolRule is a CEL expression over a pool (`object`) and a message for when it is false.
type PoolRule struct {
	// rule is a CEL expression that must be true for every pool on the class, for
	// example `object.spec.maxReplicas <= 20`. CEL's standard library, optional values,
	// cel.bind and the string extensions are available; Kubernetes' own CEL functions
	// (quantity(), ...) are not.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Rule string `json:"rule"`
	// message is shown to the tenant when the rule is false; say which field to change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message"`
}

// NodeGroupClassStatus is what the operator observes about a class.
type NodeGroupClassStatus struct {
	// conditions: InUse says which pools name the class.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeGroupClass is a worker OS flavour a platform publishes, like a StorageClass for
// worker pools. It is cluster-scoped and immutable.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="helm.sh/resource-policy=keep"
// +kubebuilder:resource:scope=Cluster,shortName=ngc;ngclass,categories=nodegroup-all
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="OS",type=string,JSONPath=`.spec.os`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image.reference`,priority=0
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'talos' || (self.spec.os == 'Talos' && !has(self.spec.image) && !has(self.spec.talos) && !has(self.spec.kairos) && !has(self.spec.imagePullSecretRef) && !has(self.spec.poolRules))",message="the built-in class 'talos' must be exactly {os: Talos}; publish a class under another name to customise it"
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'kairos' || (self.spec.os == 'Kairos' && !has(self.spec.image))",message="the built-in class 'kairos' must have os Kairos and no image; publish a class under another name for your own image"
type NodeGroupClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is immutable as a whole.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: publish a new class and move pools to it"
	Spec NodeGroupClassSpec `json:"spec"`

	// +optional
	Status NodeGroupClassStatus `json:"status,omitempty"`
}

// NodeGroupClassList is a list of NodeGroupClass.
//
// +kubebuilder:object:root=true
type NodeGroupClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeGroupClass `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &NodeGroupClass{}, &NodeGroupClassList{})
}
