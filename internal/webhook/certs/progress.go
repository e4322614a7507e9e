// A CA rotation as this replica sees it: when the next CA became trusted and the new
// serving certificate appeared, and what every replica reports it serves.

package certs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReportAnnotationPrefix starts the Secret annotations in which each replica reports,
// during a CA rotation, the serving certificate it serves: the key ends with the
// replica's name, the value is the certificate's fingerprint and the report's time.
const ReportAnnotationPrefix = "serving.webhook.nodegroup.io/"

// report is a replica's last report as this replica saw it change.
type report struct {
	value string
	seen  time.Time
}

// observe notes when this replica first saw what the rotation waits on.
func (m *Manager) observe(secret *corev1.Secret, now time.Time) {
	if next, ok := parsePair(secret.Data[KeyNextCACert], secret.Data[KeyNextCAKey]); ok && m.everyWebhookTrusts(next.cert) {
		if fp := fingerprint(next.cert); fp != m.nextTrusted {
			m.nextTrusted, m.nextTrustedSince = fp, now
		}
	} else {
		m.nextTrusted = ""
	}
	if leaf, ok := parsePair(secret.Data[KeyTLSCert], secret.Data[KeyTLSKey]); ok {
		if fp := fingerprint(leaf.cert); fp != m.leafSeen {
			m.leafSeen, m.leafSince = fp, now
		}
	}
	present := map[string]bool{}
	for k, v := range secret.Annotations {
		if !strings.HasPrefix(k, ReportAnnotationPrefix) {
			continue
		}
		present[k] = true
		if r, ok := m.reports[k]; !ok || r.value != v {
			m.reports[k] = report{value: v, seen: now}
		}
	}
	for k := range m.reports {
		if !present[k] {
			delete(m.reports, k)
		}
	}
}

// progress says how far the rotation's waits are. A replica's report is live while it
// changed within three report intervals; a replica that stopped reporting is gone.
func (m *Manager) progress(now time.Time) progress {
	window := 3 * m.reportInterval()
	pr := progress{nextCATrusted: m.nextTrusted != "" && now.Sub(m.nextTrustedSince) >= m.trustSettle()}
	served := m.served.Load()
	if served == nil || served.fingerprint != m.leafSeen || now.Sub(m.leafSince) < window {
		return pr
	}
	for _, r := range m.reports {
		if now.Sub(r.seen) < window && reportedFingerprint(r.value) != m.leafSeen {
			return pr
		}
	}
	pr.everyReplicaServes = true
	return pr
}

// reportServing writes, under this replica's name, the fingerprint of the pair it
// serves: a replica whose watch lags reports the old pair, which holds the rotation's
// last step until it has caught up. The write carries the resourceVersion of a live
// read, so it is not refused for that lag (a refused report would age out, and the
// replica would count as gone), and a report never lands on a Secret whose rotation has
// ended.
func (m *Manager) reportServing(ctx context.Context) error {
	secret, err := m.Client.CoreV1().Secrets(m.Secret.Namespace).Get(ctx, m.Secret.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the Secret %s: %w", m.Secret, err)
	}
	if !rotating(secret.Data) {
		return nil
	}
	served := m.served.Load()
	if served == nil {
		return nil
	}
	value := served.fingerprint + " " + m.now().UTC().Format(time.RFC3339Nano)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": secret.ResourceVersion,
		"annotations":     map[string]string{ReportAnnotationPrefix + m.Identity: value},
	}})
	if err != nil {
		return err
	}
	_, err = m.Client.CoreV1().Secrets(m.Secret.Namespace).Patch(ctx, m.Secret.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		return nil // the Secret moved on; the next check reports on what it holds now
	}
	if err != nil {
		return fmt.Errorf("reporting the served certificate on the Secret %s: %w", m.Secret, err)
	}
	m.lastReport = m.now()
	return nil
}

func reportedFingerprint(value string) string {
	fp, _, _ := strings.Cut(value, " ")
	return fp
}
