// Package chart tests the Helm chart in charts/nodegroup-operator with the Helm Go SDK:
// it renders the chart as `helm install` would, compares the output with golden files,
// runs `helm lint`, checks values.schema.json, and sends every rendered object to a real
// kube-apiserver (internal/testenv) so the chart is checked by the server it targets,
// including the RBAC it grants tenants and the operator. It has no non-test code.
package chart
