package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Names the chart gives the operator's objects at this release name.
const (
	ReleaseName      = "nodegroup-operator"
	ReleaseNamespace = "nodegroup-system"
	ServiceAccount   = "nodegroup-operator"
)

// chartObjects renders the platform chart with the Helm Go SDK, webhook on and
// self-managed certificates off (the environment issues the loopback certificate), and
// returns its objects in file order. The Deployment is left out: the operator runs here
// as a local process, because there is no kubelet to run its Pod.
func chartObjects(root string, values map[string]any) ([]*unstructured.Unstructured, error) {
	ch, err := loader.Load(filepath.Join(root, "charts", "nodegroup-operator"))
	if err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: ReleaseName, Namespace: ReleaseNamespace, Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		docs, err := splitYAML(out[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, obj := range docs {
			if obj.GetKind() == "Deployment" {
				continue
			}
			if obj.GetNamespace() == "" && namespacedKind(obj.GetKind()) {
				obj.SetNamespace(ReleaseNamespace)
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// splitYAML decodes a multi-document YAML stream, skipping empty documents.
func splitYAML(s string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

func namespacedKind(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "NodeGroupClass", "Location", "Namespace",
		"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "CustomResourceDefinition":
		return false
	}
	return true
}

// webhooksOnLoopback rewrites every webhook of a (Validating|Mutating)WebhookConfiguration
// from a Service reference to https://127.0.0.1:<port><path>, trusting ca: the API
// server reaches the local process the way it would reach the Service in a cluster.
func webhooksOnLoopback(obj *unstructured.Unstructured, port int, ca []byte) error {
	hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil {
		return err
	}
	for i, h := range hooks {
		hook := h.(map[string]any)
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		if err := unstructured.SetNestedMap(hook, map[string]any{
			"url":      fmt.Sprintf("https://127.0.0.1:%d%s", port, path),
			"caBundle": encodeCA(ca),
		}, "clientConfig"); err != nil {
			return err
		}
		hooks[i] = hook
	}
	return unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
}

// applyAll creates or updates objects by server-side apply, as the given field manager.
func (e *Env) applyAll(ctx context.Context, manager string, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if err := e.Apply(ctx, manager, obj); err != nil {
			return err
		}
	}
	return nil
}
