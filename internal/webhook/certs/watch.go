// The two objects the Manager watches, the Secret and the webhook configuration, each
// by its name only.

package certs

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// informer watches the one object called name (a field selector, which RBAC limited to
// that name allows) and kicks the loop on every change.
func (m *Manager) informer(obj runtime.Object, name string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return watchFn(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	kick := func() {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { kick() }, UpdateFunc: func(any, any) { kick() }, DeleteFunc: func(any) { kick() },
	})
	return inf
}

func (m *Manager) secret() *corev1.Secret {
	obj, ok, _ := m.secrets.GetByKey(m.Secret.Namespace + "/" + m.Secret.Name)
	if !ok {
		return nil
	}
	return obj.(*corev1.Secret)
}

func (m *Manager) config() *admissionregistrationv1.ValidatingWebhookConfiguration {
	if m.configs == nil {
		return nil
	}
	obj, ok, _ := m.configs.GetByKey(m.WebhookConfiguration)
	if !ok {
		return nil
	}
	return obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
}
