package webhook_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/operator"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook"
	"github.com/nodegroup-io/nodegroup-operator/internal/webhook/certs"
)

var (
	env      *testenv.Env
	hookName = "nodegroup-operator"
	// servingPort is where the webhook server listens.
	servingPort int
)

func TestMain(m *testing.M) {
	testenv.Main(m, true, func(e *testenv.Env) error {
		env = e
		ctx, cancel := context.WithCancel(context.Background())
		e.BeforeStop(cancel)
		return start(ctx)
	})
}

// start runs the operator's manager with the NodeGroup controller and the webhook,
// serving on localhost with a certificate its own certs.Manager issues, registered
// with the API server through a webhook configuration whose caBundle it fills in.
func start(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	servingPort = port
	if err := registerWebhooks(ctx, port); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	certMgr := &certs.Manager{
		Client: cs, Secret: types.NamespacedName{Namespace: "default", Name: "nodegroup-operator-webhook"},
		WebhookConfiguration: hookName, DNSNames: []string{"localhost"}, Identity: "webhook-suite",
		CAValidity: 365 * 24 * time.Hour, CertValidity: 24 * time.Hour,
	}
	go func() { _ = certMgr.Start(ctx) }()
	// The server needs its certificate before it starts.
	select {
	case <-certMgr.Serving():
	case <-time.After(30 * time.Second):
		return fmt.Errorf("no webhook certificate after 30s")
	}
	opts := operator.ManagerOptions()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){certMgr.TLSConfig}})
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		return err
	}
	if err := operator.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r := &nodegroup.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Catalog: catalog.Default(),
		ManagementDNS: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, ManagementDNSDomain: "cluster.local"}
	if err := r.Register(mgr, 2); err != nil {
		return err
	}
	webhook.RegisterWith(mgr, catalog.Default(), 0)
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cache did not sync")
	}
	return waitServing(port)
}

func registerWebhooks(ctx context.Context, port int) error {
	url := func(path string) *string { s := fmt.Sprintf("https://localhost:%d%s", port, path); return &s }
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	hook := func(name, path, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url(path)},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups: []string{"nodegroup.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{resource}}}},
			FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
		}
	}
	return env.Client.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: hookName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("nodegroups.nodegroup.io", webhook.PathNodeGroup, "nodegroups", admissionregistrationv1.Create, admissionregistrationv1.Update),
			hook("nodegroupclasses.nodegroup.io", webhook.PathNodeGroupClass, "nodegroupclasses", admissionregistrationv1.Create, admissionregistrationv1.Update),
		},
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitServing(port int) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that it listens
		if err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the webhook server did not start on port %d", port)
}
