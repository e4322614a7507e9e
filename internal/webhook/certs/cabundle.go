// The webhook configuration's caBundle: written from the Secret's bundle, and read to
// know whether every webhook trusts a CA yet.

package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

func (m *Manager) everyWebhookTrusts(ca *x509.Certificate) bool {
	cfg := m.config()
	if m.WebhookConfiguration == "" {
		return true
	}
	if cfg == nil || len(cfg.Webhooks) == 0 {
		return false
	}
	for _, w := range cfg.Webhooks {
		if !containsCert(parseCerts(w.ClientConfig.CABundle), ca) {
			return false
		}
	}
	return true
}

// injectCABundle makes every webhook's caBundle the Secret's bundle, by a strategic
// merge patch (webhooks merge by name) that carries the resourceVersion read.
func (m *Manager) injectCABundle(ctx context.Context, bundle []byte) error {
	if m.WebhookConfiguration == "" {
		return nil
	}
	cfg := m.config()
	if cfg == nil {
		return fmt.Errorf("the ValidatingWebhookConfiguration %s does not exist", m.WebhookConfiguration)
	}
	var hooks []map[string]any
	for _, w := range cfg.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			hooks = append(hooks, map[string]any{"name": w.Name, "clientConfig": map[string]any{"caBundle": bundle}})
		}
	}
	if len(hooks) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": cfg.ResourceVersion},
		"webhooks": hooks,
	})
	if err != nil {
		return err
	}
	_, err = m.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, cfg.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		return nil // the watch brings the newer configuration, and a check after it
	}
	if err != nil {
		return fmt.Errorf("writing the caBundle of %s: %w", m.WebhookConfiguration, err)
	}
	log.FromContext(ctx).Info("wrote the webhook CA bundle", "configuration", m.WebhookConfiguration, "cas", len(parseCerts(bundle)))
	return nil
}
