package render

import (
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capmox"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// The apiVersions of the objects render writes, formatted once: GroupVersion.String
// builds a new string on every call.
var (
	clusterAPIVersion = clusterv1.GroupVersion.String()
	capkAPIVersion    = capk.GroupVersion.String()
	talosAPIVersion   = talos.GroupVersion.String()
	kairosAPIVersion  = kairos.GroupVersion.String()
)

// Output is the desired state of one pool. Its objects are read-only: they share maps
// (the pool's labels, its selector, the templates' annotations; see poolMetadata), so
// DeepCopy an object before changing it.
type Output struct {
	// Bootstrap is the bootstrap config template: TalosConfigTemplate or KairosConfigTemplate.
	Bootstrap client.Object
	// Infrastructure is the machine template: KubevirtMachineTemplate, or
	// ProxmoxMachineTemplate on a Proxmox location.
	Infrastructure client.Object
	// MachineDeployment runs the pool.
	MachineDeployment *clusterv1.MachineDeployment
	// MachineHealthCheck replaces the pool's unhealthy machines.
	MachineHealthCheck *clusterv1.MachineHealthCheck
}

// Objects lists the desired objects in the order they are applied: the templates before
// the MachineDeployment that references them.
func (o *Output) Objects() []client.Object {
	return []client.Object{o.Bootstrap, o.Infrastructure, o.MachineDeployment, o.MachineHealthCheck}
}

// Render computes the desired objects of a pool.
func Render(in *Input) (*Output, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	meta := poolMetadata(in)
	var infra client.Object
	bootstrapIn := in
	if in.Location.Provider.Proxmox != nil {
		// The machines run under the tenant's satellite on the location
		// (internal/controller/satellite) and join through the location's endpoint.
		t, err := proxmoxMachineTemplate(in)
		if err != nil {
			return nil, err
		}
		infra = t
		if bootstrapIn, err = proxmoxBootstrapInput(in); err != nil {
			return nil, err
		}
	} else {
		t, err := kubevirtMachineTemplate(in)
		if err != nil {
			return nil, err
		}
		infra = t
	}
	if err := nameTemplate(in, meta, infra, templateSpec(infra)); err != nil {
		return nil, err
	}

	var bootstrap client.Object
	switch in.Class.OS {
	case v1.OSTalos:
		t, err := TalosConfigTemplate(bootstrapIn, "")
		if err != nil {
			return nil, err
		}
		if err := nameTemplate(in, meta, t, &t.Spec); err != nil {
			return nil, err
		}
		bootstrap = t
	case v1.OSKairos:
		k, err := kairosConfigTemplate(in)
		if err != nil {
			return nil, err
		}
		if err := nameTemplate(in, meta, k, &k.Spec); err != nil {
			return nil, err
		}
		bootstrap = k
	default:
		return nil, fmt.Errorf("class %q: os %q is not supported by this operator version", in.ClassName, in.Class.OS)
	}

	return &Output{
		Bootstrap:          bootstrap,
		Infrastructure:     infra,
		MachineDeployment:  machineDeployment(in, meta, templateRef(bootstrap), templateRef(infra)),
		MachineHealthCheck: machineHealthCheck(in, meta),
	}, nil
}

// metadata is what several objects of a pool carry alike. The objects share it rather
// than each getting a copy: maps are the bulk of what a render allocates, and render
// runs for every pool on every resync. Output documents that its objects are read-only.
type metadata struct {
	// name of the MachineDeployment and the MachineHealthCheck.
	name string
	// cluster is the Cluster API Cluster the pool's machines run under: the tenant's
	// Cluster, or its satellite on the pool's location.
	cluster string
	// labels of every object.
	labels map[string]string
	// selector of the pool's machines, in the MachineDeployment and the MachineHealthCheck.
	selector map[string]string
	// templateAnnotations of both templates.
	templateAnnotations map[string]string
}

func poolMetadata(in *Input) metadata {
	cluster := names.MachineClusterName(in.Cluster.Name, in.LocationName, in.Location.Provider.Satellite())
	return metadata{
		name:                names.MachineDeploymentName(in.Cluster.Name, in.Name),
		cluster:             cluster,
		labels:              objectLabels(in, cluster),
		selector:            poolSelector(in, cluster),
		templateAnnotations: map[string]string{names.AnnotationTemplateHashVersion: HashVersion},
	}
}

// nameTemplate names a template after its content and labels it as the pool's.
func nameTemplate(in *Input, meta metadata, obj client.Object, spec any) error {
	hash, err := contentHash(spec)
	if err != nil {
		return err
	}
	obj.SetName(names.TemplateName(in.Name, hash))
	obj.SetNamespace(in.Namespace)
	obj.SetLabels(meta.labels)
	obj.SetAnnotations(meta.templateAnnotations)
	return nil
}

// templateRef is the v1beta2 contract reference to a template: group, kind and name.
func templateRef(obj client.Object) clusterv1.ContractVersionedObjectReference {
	var group, kind string
	switch obj.(type) {
	case *talos.TalosConfigTemplate:
		group, kind = talos.GroupVersion.Group, "TalosConfigTemplate"
	case *kairos.KairosConfigTemplate:
		group, kind = kairos.GroupVersion.Group, "KairosConfigTemplate"
	case *capk.KubevirtMachineTemplate:
		group, kind = capk.GroupVersion.Group, "KubevirtMachineTemplate"
	case *capmox.ProxmoxMachineTemplate:
		group, kind = capmox.GroupVersion.Group, "ProxmoxMachineTemplate"
	}
	return clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: kind, Name: obj.GetName()}
}

// templateSpec is the spec of a machine template, which its name is hashed from.
func templateSpec(obj client.Object) any {
	switch t := obj.(type) {
	case *capk.KubevirtMachineTemplate:
		return &t.Spec
	case *capmox.ProxmoxMachineTemplate:
		return &t.Spec
	}
	panic(fmt.Sprintf("render: %T is not a machine template", obj))
}

// checkInput refuses an Input that resolve should never produce, with a message that
// says what is missing, rather than rendering something broken.
func checkInput(in *Input) error {
	switch {
	case in.Namespace == "" || in.Name == "":
		return fmt.Errorf("pool has no namespace or name")
	case in.Cluster.Name == "":
		return fmt.Errorf("pool %s/%s: no cluster", in.Namespace, in.Name)
	case in.KubernetesVersion == "":
		return fmt.Errorf("pool %s/%s: no Kubernetes version resolved", in.Namespace, in.Name)
	case in.Machine.InstanceType == "" && (in.Machine.MilliCPU <= 0 || in.Machine.MemoryBytes <= 0):
		return fmt.Errorf("pool %s/%s: no machine size resolved", in.Namespace, in.Name)
	}
	return nil
}
