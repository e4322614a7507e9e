package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/rulecases"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook"
)

// TestOfflineAsTheWebhook judges every admission case as the kubectl plugin's validate
// --objects does, from the objects the webhook reads (copied from the API server into an
// offline store), and expects the verdict and the words the API server answers.
func TestOfflineAsTheWebhook(t *testing.T) {
	ctx := context.Background()
	platform(t)
	ns := tenant(t, map[string]string{"tier": "silver"})
	kind, err := customresource.NodeGroup()
	if err != nil {
		t.Fatal(err)
	}
	store := storeOf(t, ns)
	validator := &webhook.NodeGroupValidator{Reader: store, Resolver: &resolve.Resolver{
		Client: store, APIReader: store, Mapper: offline.Mapper(), Catalog: catalog.Default()}}
	for i, tc := range admissionCases {
		t.Run(tc.name, func(t *testing.T) {
			ng := pool(ns, fmt.Sprintf("offline-%d", i), tc.mutate)
			serverErr := env.Client.Create(ctx, ng.DeepCopy(), client.DryRunAll)

			u := rulecases.AsSent(t, ng)
			if err := kind.Create(ctx, u); err != nil {
				t.Fatalf("refused by the CRD offline: %v (the API server: %v)", err, serverErr)
			}
			stored := &v1.NodeGroup{}
			if err := runtimeConvert(u, stored); err != nil {
				t.Fatal(err)
			}
			denied, err := validator.Check(ctx, stored, nil)
			if err != nil {
				t.Fatal(err)
			}
			var offlineMsg, serverMsg string
			if denied != "" {
				offlineMsg = `admission webhook "nodegroups.nodegroup.io" denied the request: ` + denied
			}
			if serverErr != nil {
				serverMsg = serverErr.Error()
			}
			if offlineMsg != serverMsg {
				t.Fatalf("offline and the API server differ:\noffline: %s\nserver:  %s", offlineMsg, serverMsg)
			}
		})
	}
}

// storeOf is an offline store of what the webhook reads for pools of ns: the classes,
// the locations, the namespace, and its Clusters, control planes and MachineDeployments.
func storeOf(t *testing.T, ns string) *offline.Store {
	t.Helper()
	store := offline.NewStore(scheme.New())
	for _, k := range []struct {
		gvk       schema.GroupVersionKind
		namespace string
	}{
		{v1.GroupVersion.WithKind("NodeGroupClassList"), ""},
		{v1.GroupVersion.WithKind("LocationList"), ""},
		{schema.GroupVersionKind{Version: "v1", Kind: "NamespaceList"}, ""},
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterList"}, ns},
		{schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha2", Kind: "KamajiControlPlaneList"}, ns},
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeploymentList"}, ns},
	} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk)
		if err := env.Client.List(context.Background(), list, client.InNamespace(k.namespace)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			store.Add(&list.Items[i])
		}
	}
	return store
}

func runtimeConvert(u *unstructured.Unstructured, into *v1.NodeGroup) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// TestOfflineUpdateAsTheWebhook: an OS switch of a pool whose machines run (its
// MachineDeployment among the objects) is judged offline, CRD then webhook, as the API
// server judges the update.
func TestOfflineUpdateAsTheWebhook(t *testing.T) {
	ctx := context.Background()
	platform(t)
	ns := tenant(t, nil)
	kind, err := customresource.NodeGroup()
	if err != nil {
		t.Fatal(err)
	}
	running := pool(ns, "running", nil)
	if err := env.Client.Create(ctx, running); err != nil {
		t.Fatal(err)
	}
	waitRendered(t, running)
	store := storeOf(t, ns)
	validator := &webhook.NodeGroupValidator{Reader: store, Resolver: &resolve.Resolver{
		Client: store, APIReader: store, Mapper: offline.Mapper(), Catalog: catalog.Default()}}

	var switched *v1.NodeGroup
	// Again when the controller wrote the pool's status between the read and the write.
	serverErr := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(running), running); err != nil {
			return err
		}
		switched = running.DeepCopy()
		switched.Spec.NodeGroupClassName = "kairos-own"
		return env.Client.Update(ctx, switched.DeepCopy(), client.DryRunAll)
	})

	old := rulecases.AsSent(t, running)
	u := rulecases.AsSent(t, switched)
	if err := kind.Update(ctx, u, old); err != nil {
		t.Fatalf("refused by the CRD offline: %v (the API server: %v)", err, serverErr)
	}
	stored, oldPool := &v1.NodeGroup{}, &v1.NodeGroup{}
	if err := runtimeConvert(u, stored); err != nil {
		t.Fatal(err)
	}
	if err := runtimeConvert(old, oldPool); err != nil {
		t.Fatal(err)
	}
	denied, err := validator.Check(ctx, stored, oldPool)
	if err != nil {
		t.Fatal(err)
	}
	if serverErr == nil || serverErr.Error() != `admission webhook "nodegroups.nodegroup.io" denied the request: `+denied {
		t.Fatalf("offline denied %q, the API server: %v", denied, serverErr)
	}
}
