package framework

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/nodegroup-io/nodegroup-operator/e2e/simulator"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// ProxmoxMachineCRD is the ProxmoxMachine CRD (proxmoxMachineCRD) derived from the
// pinned ProxmoxMachineTemplate CRD, for suites that start their API server without
// this package's Env.
func ProxmoxMachineCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := testenv.ProviderCRDs()
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if crd.Name == "proxmoxmachinetemplates."+crd.Spec.Group {
			return proxmoxMachineCRD(crd)
		}
	}
	return nil, fmt.Errorf("no ProxmoxMachineTemplate CRD among the provider CRDs")
}

// proxmoxMachineCRD is the CRD of capmox's ProxmoxMachine, which Cluster API makes of a
// pool's ProxmoxMachineTemplate for each Machine. Of capmox's CRDs only the template and
// the ProxmoxCluster are pinned (shared/crds-upstream); a ProxmoxMachine's spec is
// exactly the template's spec.template.spec (capmox generates both from one Go type),
// so its CRD is derived from the template's: the same versions, spec schema and CEL
// rules, the same contract labels. Its status, which only the simulated capmox writes,
// is left open: that schema is not among the pinned files.
func proxmoxMachineCRD(template *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := template.DeepCopy()
	crd.Name = "proxmoxmachines." + crd.Spec.Group
	crd.ResourceVersion, crd.UID, crd.Annotations = "", "", nil
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{
		Kind: simulator.ProxmoxMachineGVK.Kind, ListKind: simulator.ProxmoxMachineGVK.Kind + "List",
		Plural: "proxmoxmachines", Singular: "proxmoxmachine", Categories: template.Spec.Names.Categories,
	}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		root := v.Schema.OpenAPIV3Schema
		tmpl, ok := root.Properties["spec"].Properties["template"].Properties["spec"]
		if !ok {
			return nil, fmt.Errorf("%s %s: no spec.template.spec to derive the ProxmoxMachine's spec from", template.Name, v.Name)
		}
		open := true
		root.Properties = map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": root.Properties["apiVersion"],
			"kind":       root.Properties["kind"],
			"metadata":   root.Properties["metadata"],
			"spec":       tmpl,
			"status":     {Type: "object", XPreserveUnknownFields: &open},
		}
		root.Required = []string{"spec"}
		v.AdditionalPrinterColumns = nil
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	return crd, nil
}
