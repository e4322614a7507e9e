package localrun

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// OperatorContainer is the name of the operator's container in the chart's Deployment.
const OperatorContainer = "operator"

// Local is what a process outside a Pod has instead of what the Pod gives the container:
// its own listen addresses, a kubeconfig instead of the mounted ServiceAccount token, and
// folders of its own.
type Local struct {
	// Kubeconfig is the process's credentials (ServiceAccountKubeconfig: the chart's
	// ServiceAccount, as the Pod's token is).
	Kubeconfig string
	// PodName is this replica's metadata.name (the Downward API's); empty is
	// ReleaseName-0. Give each replica its own.
	PodName string
	// Dir is the replica's own folder: its TMPDIR (a Pod has its own /tmp) and, when
	// the chart renders --webhook-cert-dir (cert-manager), the certificate folder,
	// Dir/webhook-certs. Required.
	Dir string
	// Health, Metrics and Pprof are the host:port the process listens on for what the
	// chart renders; empty picks a free loopback port. WebhookPort is the webhook's port
	// (the one the webhook configuration points at: Release.Install); 0 picks one.
	Health, Metrics, Pprof string
	WebhookPort            int
}

// Command is the operator's command line for a local run: the chart's Deployment's
// arguments and environment with only the listen addresses, the kubeconfig and the
// folders changed. The address fields say where it listens; empty (0) when the chart
// turns that endpoint off.
type Command struct {
	// Args are the arguments (without the binary), Env the whole environment.
	Args, Env []string
	// Dir is Local.Dir.
	Dir                    string
	Health, Metrics, Pprof string
	WebhookPort            int
	// MetricsSecure: the chart serves metrics over HTTPS with authentication and
	// authorization (--metrics-secure, the operator's default), not plain HTTP.
	MetricsSecure bool
	// AutoscalerSettings is the JSON the chart renders for --autoscaler-settings: what
	// the operator makes each cluster's autoscaler from.
	AutoscalerSettings string
}

// ReadyURL is the operator's readiness endpoint.
func (c *Command) ReadyURL() string { return "http://" + c.Health + "/readyz" }

// MetricsURL is the operator's metrics endpoint; empty when metrics are off.
func (c *Command) MetricsURL() string {
	if c.Metrics == "" {
		return ""
	}
	if c.MetricsSecure {
		return "https://" + c.Metrics + "/metrics"
	}
	return "http://" + c.Metrics + "/metrics"
}

// ScrapeMetrics reads the operator's metrics endpoint as Prometheus does, with token as
// its bearer token (over HTTPS when MetricsSecure; controller-runtime serves them with a
// self-signed certificate), and returns the exposition text.
func (c *Command) ScrapeMetrics(ctx context.Context, token string) (string, error) {
	url := c.MetricsURL()
	if url == "" {
		return "", errors.New("the chart renders the operator without metrics")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // authentication is the token's
	}}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("metrics: %s", resp.Status)
	}
	return string(body), nil
}

// Cmd is the command running the operator binary bin with c's arguments and
// environment.
func (c *Command) Cmd(bin string) *exec.Cmd {
	cmd := exec.Command(bin, c.Args...)
	cmd.Env = c.Env
	return cmd
}

// Command renders the operator's local command line from the release's Deployment.
func (r *Release) Command(local Local) (*Command, error) {
	deploy, err := r.Deployment()
	if err != nil {
		return nil, err
	}
	return LocalCommand(deploy, local)
}

// LocalCommand turns the operator container of deploy into a local command line. It
// refuses what it does not know how to carry outside a Pod (an argument it has no rule
// for, an env source other than the Downward API fields below, a command, envFrom):
// a chart change then fails here instead of running the suites differently from the
// chart.
func LocalCommand(deploy *appsv1.Deployment, local Local) (*Command, error) {
	if local.Dir == "" || local.Kubeconfig == "" {
		return nil, errors.New("localrun: Local.Dir and Local.Kubeconfig are required")
	}
	if local.PodName == "" {
		local.PodName = ReleaseName + "-0"
	}
	var ctr *corev1.Container
	for i := range deploy.Spec.Template.Spec.Containers {
		if c := &deploy.Spec.Template.Spec.Containers[i]; c.Name == OperatorContainer {
			ctr = c
		}
	}
	if ctr == nil {
		return nil, fmt.Errorf("localrun: the Deployment %s has no container %q", deploy.Name, OperatorContainer)
	}
	if len(ctr.Command) > 0 || len(ctr.EnvFrom) > 0 {
		return nil, fmt.Errorf("localrun: the container %q sets command or envFrom, which a local run does not know how to carry", ctr.Name)
	}
	cmd := &Command{Dir: local.Dir}
	args, err := cmd.args(ctr.Args, local)
	if err != nil {
		return nil, err
	}
	cmd.Args = args
	env, err := containerEnv(ctr, deploy.Namespace, local.PodName)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(baseEnv(filepath.Join(local.Dir, "tmp")), env...)
	if err := os.MkdirAll(filepath.Join(local.Dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	return cmd, nil
}

// argRule carries one flag the chart renders to a local process: it returns the value
// to pass.
type argRule func(c *Command, value string, local Local) (string, error)

// keep passes a flag as the chart renders it.
func keep(_ *Command, value string, _ Local) (string, error) { return value, nil }

// argRules are the flags the chart may render, by name, and how each runs outside a
// Pod. A flag missing here makes LocalCommand fail: add it, as kept unless it names an
// address, a port or a path of the Pod.
var argRules = map[string]argRule{
	"health-probe-bind-address": func(c *Command, _ string, l Local) (string, error) {
		var err error
		c.Health, err = addrOr(l.Health)
		return c.Health, err
	},
	// "0" turns metrics off.
	"metrics-bind-address": rebind("0", func(c *Command) *string { return &c.Metrics }, func(l Local) string { return l.Metrics }),
	"metrics-secure": func(c *Command, v string, _ Local) (string, error) {
		b, err := strconv.ParseBool(v)
		c.MetricsSecure = b
		return v, err
	},
	// Empty turns profiling off.
	"pprof-bind-address": rebind("", func(c *Command) *string { return &c.Pprof }, func(l Local) string { return l.Pprof }),
	"webhook-port": func(c *Command, _ string, l Local) (string, error) {
		c.WebhookPort = l.WebhookPort
		if c.WebhookPort == 0 {
			var err error
			if c.WebhookPort, err = FreePort(); err != nil {
				return "", err
			}
		}
		return strconv.Itoa(c.WebhookPort), nil
	},
	// Rendered with cert-manager only: its Secret is mounted there in a Pod. A local
	// run fills the folder itself.
	"webhook-cert-dir": func(_ *Command, _ string, l Local) (string, error) {
		dir := filepath.Join(l.Dir, "webhook-certs")
		return dir, os.MkdirAll(dir, 0o700)
	},
	"leader-elect":              keep,
	"leader-election-namespace": keep,
	"concurrency":               keep,
	"sync-period":               keep,
	"management-dns-namespace":  keep,
	"management-dns-service":    keep,
	"management-dns-domain":     keep,
	"zap-log-level":             keep,
	"enable-webhook":            keep,
	"webhook-manage-certs":      keep,
	"webhook-secret-name":       keep,
	"webhook-configuration":     keep,
	"webhook-dns-names":         keep,
	"webhook-cert-validity":     keep,
	"webhook-ca-validity":       keep,
	"max-pools-per-namespace":   keep,
	"autoscaler-settings": func(c *Command, v string, _ Local) (string, error) {
		c.AutoscalerSettings = v
		return v, nil
	},
}

// args carries the rendered arguments through argRules and adds what a Pod gives the
// process otherwise: --kubeconfig for the mounted ServiceAccount token. (The lease's
// namespace comes from POD_NAMESPACE, which the environment carries.)
func (c *Command) args(rendered []string, local Local) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, arg := range rendered {
		name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !ok || !strings.HasPrefix(arg, "--") {
			return nil, fmt.Errorf("localrun: the chart renders the argument %q; only --name=value is known", arg)
		}
		rule, known := argRules[name]
		if !known {
			return nil, fmt.Errorf("localrun: the chart renders --%s, which localrun does not know how to run outside a Pod: add it to argRules", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("localrun: the chart renders --%s twice", name)
		}
		seen[name] = true
		v, err := rule(c, value, local)
		if err != nil {
			return nil, fmt.Errorf("localrun: --%s=%s: %w", name, value, err)
		}
		out = append(out, "--"+name+"="+v)
	}
	if !seen["health-probe-bind-address"] {
		return nil, errors.New("localrun: the chart renders no --health-probe-bind-address: a local run cannot tell when the operator is ready")
	}
	return append(out, "--kubeconfig="+local.Kubeconfig), nil
}

// rebind is the rule of a listen address the chart turns off with the value off: the
// address local gives (or a free loopback one), also kept in the Command field.
func rebind(off string, field func(*Command) *string, local func(Local) string) argRule {
	return func(c *Command, v string, l Local) (string, error) {
		if v == off {
			return v, nil
		}
		addr, err := addrOr(local(l))
		*field(c) = addr
		return addr, err
	}
}

// addrOr is addr, or a free loopback address when it is empty.
func addrOr(addr string) (string, error) {
	if addr != "" {
		return addr, nil
	}
	port, err := FreePort()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), err
}

// FreePort asks the kernel for a free loopback port. Another process may take it before
// ours binds it; on a single-user test machine that race has not been seen.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// baseEnv is what the process inherits from this one: the search path and home only
// (an image sets them too). Nothing else of the test process leaks: not its GOGC or
// GOMEMLIMIT, not its KUBECONFIG. TMPDIR is the replica's own folder.
func baseEnv(tmp string) []string {
	env := []string{"TMPDIR=" + tmp}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// containerEnv resolves the container's env as a kubelet would for a Pod named podName
// in namespace: literal values, and the Downward API fields the chart uses.
func containerEnv(ctr *corev1.Container, namespace, podName string) ([]string, error) {
	var env []string
	for _, e := range ctr.Env {
		v, err := envValue(ctr, e, namespace, podName)
		if err != nil {
			return nil, fmt.Errorf("localrun: env %s: %w", e.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func envValue(ctr *corev1.Container, e corev1.EnvVar, namespace, podName string) (string, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		if strings.Contains(e.Value, "$(") {
			return "", errors.New("a $(VAR) reference, which localrun does not expand")
		}
		return e.Value, nil
	case from.FieldRef != nil:
		switch from.FieldRef.FieldPath {
		case "metadata.namespace":
			return namespace, nil
		case "metadata.name":
			return podName, nil
		}
		return "", fmt.Errorf("fieldRef %s, which localrun does not know", from.FieldRef.FieldPath)
	case from.ResourceFieldRef != nil:
		ref := from.ResourceFieldRef
		if ref.Resource != "limits.memory" || (ref.ContainerName != "" && ref.ContainerName != ctr.Name) {
			return "", fmt.Errorf("resourceFieldRef %s of container %q, which localrun does not know", ref.Resource, ref.ContainerName)
		}
		return memoryLimit(ctr, ref.Divisor)
	}
	return "", errors.New("a source other than a value, fieldRef or resourceFieldRef")
}

// memoryLimit is the container's memory limit as the Downward API gives it: in units of
// divisor (bytes when zero), rounded up; without a limit, the node's memory (here: this
// machine's), as the kubelet gives its allocatable memory.
func memoryLimit(ctr *corev1.Container, divisor resource.Quantity) (string, error) {
	limit, ok := ctr.Resources.Limits[corev1.ResourceMemory]
	n := limit.Value()
	if !ok {
		var err error
		if n, err = machineMemory(); err != nil {
			return "", err
		}
	}
	d := divisor.Value()
	if divisor.IsZero() {
		d = 1
	}
	return strconv.FormatInt(int64(math.Ceil(float64(n)/float64(d))), 10), nil
}

// machineMemory is this machine's memory in bytes (MemTotal of /proc/meminfo).
func machineMemory() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	s := bufio.NewScanner(strings.NewReader(string(data)))
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no MemTotal in /proc/meminfo")
}

// Deployment is the release's Deployment of the operator, typed.
func (r *Release) Deployment() (*appsv1.Deployment, error) {
	for _, obj := range r.Objects {
		if obj.GetKind() != "Deployment" {
			continue
		}
		deploy := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, deploy); err != nil {
			return nil, fmt.Errorf("the chart's Deployment: %w", err)
		}
		return deploy, nil
	}
	return nil, errors.New("the chart renders no Deployment")
}
