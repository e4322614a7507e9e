package localrun

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LoopbackHost is the host name the API server calls a local operator's webhook by. A
// suite passes it in webhook.extraDNSNames, so the certificate the operator issues
// itself is valid for it, as it is for the Service's names in a cluster.
const LoopbackHost = "localhost"

// Release is the chart rendered with a suite's values, as a local run installs and runs
// it, and the CRD chart it needs.
type Release struct {
	// CRDs are the objects of the chart nodegroup-operator-crds (the CRDs).
	CRDs []*unstructured.Unstructured
	// Objects are the objects of the chart nodegroup-operator.
	Objects []*unstructured.Unstructured
}

// Render renders the CRD chart and the operator's chart at root, the latter with values
// (chartObjects).
func Render(root string, values map[string]any) (*Release, error) {
	crds, err := chartObjects(root, "nodegroup-operator-crds", CRDReleaseName, nil)
	if err != nil {
		return nil, err
	}
	objs, err := chartObjects(root, "nodegroup-operator", ReleaseName, values)
	if err != nil {
		return nil, err
	}
	return &Release{CRDs: crds, Objects: objs}, nil
}

// LocalObjects are the objects a local run applies: the CRDs first, as a platform
// installs the CRD chart before the operator's, then every rendered object but the
// Deployment (no kubelet runs its Pods: the operator runs as a local process instead),
// with every webhook of the webhook configurations called at
// https://localhost:<webhookPort><path> instead of through the Service, and without a
// caBundle, which the operator writes as it does in a cluster. It fails when the
// operator's certificate would not be valid for that name.
func (r *Release) LocalObjects(webhookPort int) ([]*unstructured.Unstructured, error) {
	if err := r.checkLoopbackName(); err != nil {
		return nil, err
	}
	out := slices.Clone(r.CRDs)
	for _, obj := range r.Objects {
		switch obj.GetKind() {
		case "Deployment":
			continue
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			obj = obj.DeepCopy()
			if err := WebhooksOnLoopback(obj, webhookPort, nil); err != nil {
				return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
		out = append(out, obj)
	}
	return out, nil
}

// Install creates the release namespace and applies LocalObjects(webhookPort) by
// server-side apply as the field manager helm: a helm install, but for the Deployment.
func (r *Release) Install(ctx context.Context, c client.Client, webhookPort int) error {
	objs, err := r.LocalObjects(webhookPort)
	if err != nil {
		return err
	}
	if err := CreateNamespace(ctx, c); err != nil {
		return err
	}
	return Apply(ctx, c, "helm", objs)
}

// CreateNamespace creates the release namespace, as helm install --create-namespace.
func CreateNamespace(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ReleaseNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// Apply applies objs by server-side apply as the field manager manager, taking
// ownership. A CustomResourceDefinition is waited for until it is established, so the
// objects after it may be of its kind.
func Apply(ctx context.Context, c client.Client, manager string, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(manager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			if err := waitEstablished(ctx, c, obj.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitEstablished waits until the CRD name is served (its Established condition), for
// at most a minute.
func waitEstablished(ctx context.Context, c client.Client, name string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, err
		}
		return apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established), nil
	})
}

// WebhooksOnLoopback rewrites every webhook of a (Validating|Mutating)WebhookConfiguration
// from a Service reference to https://localhost:<port><path>: the API server reaches the
// local process the way it would reach the Service in a cluster. The caBundle is ca;
// nil leaves none, for a server that writes its own (the operator).
func WebhooksOnLoopback(obj *unstructured.Unstructured, port int, ca []byte) error {
	hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil {
		return err
	}
	for i, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("webhook %d is not an object", i)
		}
		cc, _, _ := unstructured.NestedMap(hook, "clientConfig")
		svc, ok := cc["service"].(map[string]any)
		if _, url := cc["url"]; !ok || url {
			return fmt.Errorf("webhook %v: clientConfig %v, a Service reference expected", hook["name"], cc)
		}
		path, _ := svc["path"].(string)
		hook["clientConfig"] = map[string]any{"url": fmt.Sprintf("https://%s:%d%s", LoopbackHost, port, path)}
		if ca != nil {
			hook["clientConfig"].(map[string]any)["caBundle"] = base64.StdEncoding.EncodeToString(ca)
		}
		hooks[i] = hook
	}
	return unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
}

// checkLoopbackName fails when the operator issues its own webhook certificate
// (--webhook-manage-certs=true) for names without LoopbackHost: the API server would
// refuse it at the loopback URL.
func (r *Release) checkLoopbackName() error {
	deploy, err := r.Deployment()
	if err != nil {
		return err
	}
	args := operatorArgs(deploy)
	if !slices.Contains(args, "--enable-webhook=true") || !slices.Contains(args, "--webhook-manage-certs=true") {
		return nil
	}
	for _, a := range args {
		if names, ok := strings.CutPrefix(a, "--webhook-dns-names="); ok && slices.Contains(strings.Split(names, ","), LoopbackHost) {
			return nil
		}
	}
	return errors.New("localrun: the operator's webhook certificate is not issued for " + LoopbackHost +
		": render the chart with webhook.extraDNSNames: [" + LoopbackHost + "]")
}

func operatorArgs(deploy *appsv1.Deployment) []string {
	for _, c := range deploy.Spec.Template.Spec.Containers {
		if c.Name == OperatorContainer {
			return c.Args
		}
	}
	return nil
}

// LoopbackValues are chart values for a local run: values (which it does not change)
// with LoopbackHost added to webhook.extraDNSNames.
func LoopbackValues(values map[string]any) map[string]any {
	out := maps.Clone(values)
	if out == nil {
		out = map[string]any{}
	}
	webhook, _ := out["webhook"].(map[string]any)
	webhook = maps.Clone(webhook)
	if webhook == nil {
		webhook = map[string]any{}
	}
	names, _ := webhook["extraDNSNames"].([]any)
	webhook["extraDNSNames"] = append(slices.Clone(names), LoopbackHost)
	out["webhook"] = webhook
	return out
}

// Deploy is what a local run does before it starts the operator: it renders the chart
// with LoopbackValues(values), installs it with the webhook on a free loopback port,
// and writes a kubeconfig of the chart's ServiceAccount, valid for tokenValidity, into
// dir. The Local it returns names them, and dir/operator as the replica's folder.
func Deploy(ctx context.Context, cfg *rest.Config, c client.Client, root, dir string, values map[string]any, tokenValidity time.Duration) (*Release, Local, error) {
	rel, err := Render(root, LoopbackValues(values))
	if err != nil {
		return nil, Local{}, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, Local{}, err
	}
	if err := rel.Install(ctx, c, port); err != nil {
		return nil, Local{}, err
	}
	kubeconfig := filepath.Join(dir, "operator.kubeconfig")
	if err := ServiceAccountKubeconfig(ctx, cfg, kubeconfig, tokenValidity); err != nil {
		return nil, Local{}, err
	}
	return rel, Local{Kubeconfig: kubeconfig, Dir: filepath.Join(dir, "operator"), WebhookPort: port}, nil
}
