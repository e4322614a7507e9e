package framework

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
)

// Names the chart gives the operator's objects at this release name.
const (
	ReleaseName      = localrun.ReleaseName
	ReleaseNamespace = localrun.ReleaseNamespace
	ServiceAccount   = localrun.ServiceAccount
)

// webhooksOnLoopback rewrites every webhook of Cluster API's
// (Validating|Mutating)WebhookConfigurations from a Service reference to
// https://127.0.0.1:<port><path>, trusting ca (the environment's certificate): the API
// server reaches the local manager the way it would reach the Service in a cluster. The
// operator's own configuration is rewritten by localrun, without a caBundle.
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
