package tenant

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// A kubeconfig with its credentials inline is read; one that would make the operator
// run a command, read its own files, go through a proxy or impersonate is refused.
func TestRestConfigTakesOnlyInlineCredentials(t *testing.T) {
	const base = `apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://10.0.0.1:6443", %CLUSTER%}}]
users: [{name: u, user: {%USER%}}]
`
	kc := func(cluster, user string) []byte {
		return []byte(strings.NewReplacer("%CLUSTER%", cluster, "%USER%", user).Replace(base))
	}
	cfg, err := restConfig(kc(`certificate-authority-data: Y2E=`, `token: abc`))
	if err != nil {
		t.Fatalf("an inline kubeconfig: %v", err)
	}
	if cfg.Host != "https://10.0.0.1:6443" || cfg.BearerToken != "abc" || string(cfg.CAData) != "ca" {
		t.Errorf("config %+v", cfg)
	}
	for name, c := range map[string][2]string{
		"exec":             {`certificate-authority-data: Y2E=`, `exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}`},
		"token file":       {`certificate-authority-data: Y2E=`, `tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token`},
		"CA file":          {`certificate-authority: /etc/ssl/ca.crt`, `token: abc`},
		"client cert file": {`certificate-authority-data: Y2E=`, `client-certificate: /tmp/c.crt, client-key: /tmp/c.key`},
		"proxy":            {`certificate-authority-data: Y2E=, proxy-url: "http://evil:3128"`, `token: abc`},
		"impersonation":    {`certificate-authority-data: Y2E=`, `token: abc, as: system:admin`},
		"auth provider":    {`certificate-authority-data: Y2E=`, `auth-provider: {name: oidc}`},
	} {
		if _, err := restConfig(kc(c[0], c[1])); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The autoscaler's copy keeps the server, CA, TLS name and credentials and nothing
// else (other contexts, extensions, preferences), and is refused as restConfig refuses.
func TestCleanKubeconfigKeepsOnlyTheInlineCredentials(t *testing.T) {
	in := []byte(`apiVersion: v1
kind: Config
current-context: c
preferences: {colors: true}
contexts:
- {name: c, context: {cluster: k, user: u, namespace: kube-system}}
- {name: other, context: {cluster: k2, user: u2}}
clusters:
- {name: k, cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: Y2E=, tls-server-name: api.tenant}}
- {name: k2, cluster: {server: "https://evil.example.com"}}
users:
- {name: u, user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}}
- {name: u2, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}
`)
	out, err := CleanKubeconfig(in)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(kc.Contexts) != 1 || len(kc.Clusters) != 1 || len(kc.AuthInfos) != 1 || len(kc.Extensions) != 0 {
		t.Fatalf("the copy holds more than one context, cluster and user:\n%s", out)
	}
	cfg, err := restConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.0.0.1:6443" || string(cfg.CAData) != "ca" || cfg.ServerName != "api.tenant" ||
		string(cfg.CertData) != "cert" || string(cfg.KeyData) != "key" || cfg.BearerToken != "" {
		t.Errorf("copy %+v", cfg)
	}
	if strings.Contains(string(out), "tokenFile") || strings.Contains(string(out), "evil") {
		t.Errorf("the copy keeps what it should drop:\n%s", out)
	}
	if _, err := CleanKubeconfig([]byte(strings.Replace(string(in), "current-context: c", "current-context: other", 1))); err == nil {
		t.Error("a current context with a tokenFile user was copied")
	}
}
