// The body Apply sends: what render set, our label and our owner reference, and
// nothing the server owns.

package apply

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/names"
)

// Desired is the body Apply sends for obj owned by owner: obj without server-set
// metadata and status, with the managed-by label and the owner's controller reference.
// Benchmarks use it to send exactly the operator's objects with another client.
// A mutable object carries AnnotationApplied as its create leaves it.
func Desired(owner Owner, obj client.Object) (*unstructured.Unstructured, error) {
	u, sum, err := desiredObject(owner, obj)
	if err != nil || isTemplate(obj) {
		return u, err
	}
	return stamped(u, sum, 1), nil
}

// desiredObject is obj as the unstructured apply configuration we send, without
// AnnotationApplied (see stamped), and the digests of that body and its spec. Only what
// render set goes in, plus our label and owner reference: the typed-to-unstructured
// conversion would otherwise send `creationTimestamp: null` and an empty status, and
// claim them.
func desiredObject(owner Owner, obj client.Object) (*unstructured.Unstructured, digests, error) {
	u, err := desiredBody(owner, obj)
	if err != nil {
		return nil, digests{}, err
	}
	if annotations := u.GetAnnotations(); annotations != nil {
		delete(annotations, AnnotationApplied)
		u.SetAnnotations(annotations)
	}
	body, err := digest(u.Object, 16)
	if err != nil {
		return nil, digests{}, err
	}
	spec, err := digest(u.Object["spec"], 8)
	return u, digests{body, spec}, err
}

func desiredBody(owner Owner, obj client.Object) (*unstructured.Unstructured, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("apply %T %s/%s: apiVersion and kind are not set", obj, obj.GetNamespace(), obj.GetName())
	}
	what := fmt.Sprintf("%s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())
	if obj.GetName() == "" || obj.GetNamespace() == "" {
		return nil, fmt.Errorf("apply %s: name and namespace are required", what)
	}
	if owner.Object == nil || owner.Object.GetUID() == "" || owner.Object.GetName() == "" || owner.GVK.Kind == "" {
		return nil, fmt.Errorf("apply %s: the owner needs a name, a UID and a kind", what)
	}
	// An owner reference across namespaces is invalid, and the garbage collector would
	// delete the object.
	if owner.Object.GetNamespace() != obj.GetNamespace() {
		return nil, fmt.Errorf("apply %s: owner %s %s/%s is in another namespace",
			what, owner.GVK.Kind, owner.Object.GetNamespace(), owner.Object.GetName())
	}

	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("apply %s: converting to unstructured: %w", what, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields",
		"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}

	if isMachineDeployment(gvk) {
		if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); found {
			return nil, fmt.Errorf("apply %s: %w", what, ErrReplicasSet)
		}
	}

	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[names.LabelManagedBy] = names.ManagedByValue
	u.SetLabels(labels)

	refs := make([]metav1.OwnerReference, 0, 1)
	for _, ref := range u.GetOwnerReferences() {
		if ref.UID == owner.Object.GetUID() {
			continue
		}
		if ptr.Deref(ref.Controller, false) {
			return nil, fmt.Errorf("apply %s: the desired object already names controller %s %s", what, ref.Kind, ref.Name)
		}
		refs = append(refs, ref)
	}
	u.SetOwnerReferences(append(refs, *metav1.NewControllerRef(owner.Object, owner.GVK)))
	return u, nil
}

func isMachineDeployment(gvk schema.GroupVersionKind) bool {
	return gvk.Group == clusterv1.GroupVersion.Group && gvk.Kind == "MachineDeployment"
}
