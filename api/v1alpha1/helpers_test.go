package v1alpha1_test

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func unstructuredFrom(m map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: m}
}
