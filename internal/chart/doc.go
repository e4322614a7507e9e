// Package chart tests the Helm charts in charts/nodegroup-operator and
// charts/nodegroup-operator-crds with the Helm Go SDK: it renders the chart as `helm
// install` would, alone and as the dependency of a parent chart (testdata/parent),
// compares the output with golden files, runs `helm lint --strict`, checks
// values.schema.json, and sends every rendered object to a real kube-apiserver
// (internal/testenv) so the chart is checked by the server it targets, including the
// RBAC it grants tenants and the operator. It installs and upgrades both charts as
// releases (action.Install, action.Upgrade) on a control plane of its own. It has no
// non-test code.
package chart
