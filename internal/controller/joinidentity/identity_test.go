package joinidentity

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
)

// mint keeps the tenant CA as given and makes the rest: a machine CA whose key matches
// it, a bootstrap token Kubernetes accepts, and the trustd and discovery secrets.
func TestMint(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	data, err := mint(ca, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if string(data[resolve.TalosKeyClusterCACert]) != string(ca) {
		t.Errorf("cluster-ca.crt is not the given CA")
	}
	block, _ := pem.Decode(data[resolve.TalosKeyMachineCACert])
	if block == nil {
		t.Fatal("machine-ca.crt is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !cert.IsCA {
		t.Fatalf("machine CA: %v", err)
	}
	keyBlock, _ := pem.Decode(data[resolve.TalosKeyMachineCAKey])
	if keyBlock == nil {
		t.Fatal("machine-ca.key is not PEM")
	}
	if !bootstraputil.IsValidBootstrapToken(string(data[resolve.TalosKeyBootstrapToken])) {
		t.Errorf("bootstrap token %q", data[resolve.TalosKeyBootstrapToken])
	}
	for _, k := range []string{resolve.TalosKeyMachineToken, resolve.TalosKeyClusterID, resolve.TalosKeyClusterSecret} {
		if len(data[k]) < 16 {
			t.Errorf("%s = %q", k, data[k])
		}
	}
	other, err := mint(ca, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{resolve.TalosKeyMachineToken, resolve.TalosKeyClusterSecret, resolve.TalosKeyBootstrapToken, resolve.TalosKeyMachineCAKey} {
		if string(other[k]) == string(data[k]) {
			t.Errorf("two identities share %s", k)
		}
	}
}

// BenchmarkMint is one cluster's identity as the operator mints it, and as the current
// Talos contract would (RSA service-account key), to show why bundleContract is 1.6.
func BenchmarkMint(b *testing.B) {
	b.Run("contract-1.6", func(b *testing.B) {
		for b.Loop() {
			if _, err := mint(nil, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("contract-current", func(b *testing.B) {
		for b.Loop() {
			if _, err := secrets.NewBundle(secrets.NewFixedClock(time.Now()), talosconfig.TalosVersionCurrent); err != nil {
				b.Fatal(err)
			}
		}
	})
}
