package main

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// serverTable asks the API server for resource (of our group, in namespace, or of every
// namespace when it is empty) as a table: the columns the CRD declares, so the plugin
// and `kubectl get` print the same ones, from one place.
func (f clusterFlags) serverTable(ctx context.Context, resource, namespace string) (*metav1.Table, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &v1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	res := rc.Get().NamespaceIfScoped(namespace, namespace != "").Resource(resource).Do(ctx)
	// Error, unlike Raw, reads the API server's Status: its reason and message.
	if err := res.Error(); err != nil {
		return nil, err
	}
	body, err := res.Raw()
	if err != nil {
		return nil, err
	}
	t := &metav1.Table{}
	if err := json.Unmarshal(body, t); err != nil {
		return nil, err
	}
	// Each row carries its object's metadata, which the printer reads for -A's
	// namespace column.
	for i := range t.Rows {
		m := &metav1.PartialObjectMetadata{}
		if err := json.Unmarshal(t.Rows[i].Object.Raw, m); err != nil {
			return nil, err
		}
		t.Rows[i].Object.Object = m
	}
	return t, nil
}

// rowName is the name of the object of a row of serverTable.
func rowName(r metav1.TableRow) string {
	return r.Object.Object.(*metav1.PartialObjectMetadata).Name
}
