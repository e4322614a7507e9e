// Package operator decides, once for every controller of the operator, what they share
// in one manager: the manager's scheme, cache and client options, and the field indexes
// the controllers list by. cmd/nodegroup-operator builds its manager from it, and so
// does every test suite that runs the controllers, so a test runs them as the operator
// does. The controllers use the index names and register no index of their own.
package operator

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
)

// ManagerOptions are the options of a manager that runs the operator's controllers: the
// operator's scheme, CacheOptions, and a client that reads Secrets and webhook
// configurations from the API server, one by one, by name: an informer would hold every
// Secret of the management cluster in memory. The caller adds its own settings (the
// operator its flags, a test suite its client interceptor).
func ManagerOptions() ctrl.Options {
	return ctrl.Options{
		Scheme: scheme.New(),
		Cache:  CacheOptions(),
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{
			&corev1.Secret{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
		}}},
	}
}
