package v1alpha1_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// TestTalosOnlyFieldsSetIsWhatHasSees: a spec sets a Talos-only field, for
// SetTalosOnlyFields, exactly when the object a CEL rule sees has it, by the same name.
func TestTalosOnlyFieldsSetIsWhatHasSees(t *testing.T) {
	for _, spec := range []v1.NodeGroupSpec{
		{},
		{OSImage: "factory.talos.dev/installer/abc:v1.11.0"},
		{KernelModules: []string{"nvidia"}},
		{KernelModules: []string{}},
		{GPUs: []v1.GPU{{DeviceName: "nvidia.com/GA102GL_A10"}}},
		{Talos: &v1.NodeGroupTalos{}},
		{OSImage: "x", KernelModules: []string{"m"}, GPUs: []v1.GPU{{DeviceName: "d"}}, Talos: &v1.NodeGroupTalos{}},
	} {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
		if err != nil {
			t.Fatal(err)
		}
		var has []string
		for _, f := range v1.TalosOnlyFields() {
			if _, ok := obj[f]; ok {
				has = append(has, f)
			}
		}
		if got := spec.SetTalosOnlyFields(); !slices.Equal(got, has) {
			t.Errorf("%+v: SetTalosOnlyFields %v, has() sees %v", spec, got, has)
		}
	}
}

// TestCRDRefusesTalosOnlyFieldsAsThePolicyDoes: the CRD's rule tests every Talos-only
// field, and its message is TalosOnlyFieldsMessage, which names every field.
func TestCRDRefusesTalosOnlyFieldsAsThePolicyDoes(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "nodegroups.nodegroup.io"}, crd); err != nil {
		t.Fatal(err)
	}
	var rule *apiextensionsv1.ValidationRule
	for _, r := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].XValidations {
		if strings.Contains(r.Rule, "has(self.osImage)") {
			rule = &r
		}
	}
	if rule == nil {
		t.Fatal("the CRD has no Talos-only fields rule on spec")
	}
	if rule.Message != v1.TalosOnlyFieldsMessage {
		t.Errorf("the CRD's message %q, want v1.TalosOnlyFieldsMessage %q", rule.Message, v1.TalosOnlyFieldsMessage)
	}
	for _, f := range v1.TalosOnlyFields() {
		if !strings.Contains(rule.Rule, "has(self."+f+")") {
			t.Errorf("the CRD's rule does not test spec.%s: %s", f, rule.Rule)
		}
		if !strings.Contains(v1.TalosOnlyFieldsMessage, "spec."+f) {
			t.Errorf("TalosOnlyFieldsMessage does not name spec.%s", f)
		}
	}
}
