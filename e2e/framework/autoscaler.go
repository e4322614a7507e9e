package framework

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodegroup-io/nodegroup-operator/internal/autoscaler"
	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
)

// The cluster-autoscaler binary the suites run: the module proxy does not serve the
// autoscaler's module, so the project cannot build it; ../shared/tools holds a build of
// the upstream release (see its SOURCES.md), checked by its sha256 before use.
const (
	// AutoscalerBinEnv names the binary; AutoscalerSHA256Env its sha256 when it is
	// another build than the default.
	AutoscalerBinEnv    = "CLUSTER_AUTOSCALER"
	AutoscalerSHA256Env = "CLUSTER_AUTOSCALER_SHA256"
	// defaultAutoscaler is relative to the repository's parent folder.
	defaultAutoscaler       = "shared/tools/cluster-autoscaler-1.36.1/cluster-autoscaler"
	defaultAutoscalerSHA256 = "63fe33ccce13da13b05af229e24bd65ca60d5f2a3b1e6260dd2fbe2ad8f5b8b0"
)

// serviceAccountDir is where a Pod's ServiceAccount token, CA and namespace are mounted;
// rest.InClusterConfig reads them from there and nowhere else.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ErrNoAutoscaler: the autoscaler binary is not there.
var ErrNoAutoscaler = errors.New("no cluster-autoscaler binary")

// AutoscalerBinary is the cluster-autoscaler to run and whether its sha256 is the one
// expected. It is ErrNoAutoscaler when the file does not exist.
func (e *Env) AutoscalerBinary() (string, error) {
	bin, sum := os.Getenv(AutoscalerBinEnv), os.Getenv(AutoscalerSHA256Env)
	if bin == "" {
		bin = filepath.Join(filepath.Dir(e.root), defaultAutoscaler)
	}
	if sum == "" {
		sum = defaultAutoscalerSHA256
	}
	f, err := os.Open(bin)
	if err != nil {
		return "", fmt.Errorf("%w at %s (set %s): %v", ErrNoAutoscaler, bin, AutoscalerBinEnv, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return "", fmt.Errorf("%s has sha256 %s, want %s (set %s for another build)", bin, got, sum, AutoscalerSHA256Env)
	}
	return bin, nil
}

// RunAutoscaler runs the cluster's autoscaler as its Deployment, which the operator
// made, would run in a Pod: the container's arguments and environment unchanged, the
// image's binary replaced by the test binary, and, in a mount namespace of its own, the
// Pod's volumes at their mount paths (each Secret volume's items written as files, as
// the kubelet projects them) and the ServiceAccount's token, the management API
// server's CA and the namespace at the ServiceAccount mount; KUBERNETES_SERVICE_HOST and
// _PORT name the management API server, as the Service environment of a Pod does.
func (e *Env) RunAutoscaler(ctx context.Context, cluster types.NamespacedName) (*localrun.Process, error) {
	bin, err := e.AutoscalerBinary()
	if err != nil {
		return nil, err
	}
	dep := &appsv1.Deployment{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: autoscaler.Name(cluster.Name)}, dep); err != nil {
		return nil, fmt.Errorf("the autoscaler Deployment of %s: %w", cluster, err)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		return nil, fmt.Errorf("the autoscaler Deployment has %d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	dir := filepath.Join(e.Work, "autoscaler-"+cluster.Namespace+"-"+cluster.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	mounts := map[string]string{} // mount path -> folder
	for _, m := range ctr.VolumeMounts {
		src, err := e.volumeFiles(ctx, cluster.Namespace, pod.Volumes, m, filepath.Join(dir, "volumes", m.Name))
		if err != nil {
			return nil, err
		}
		mounts[m.MountPath] = src
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		src := filepath.Join(dir, "serviceaccount")
		token, err := localrun.ServiceAccountToken(ctx, e.Config, cluster.Namespace, pod.ServiceAccountName, 6*time.Hour)
		if err != nil {
			return nil, err
		}
		if err := writeFiles(src, map[string][]byte{
			"token": []byte(token), "ca.crt": e.Config.CAData, "namespace": []byte(cluster.Namespace),
		}); err != nil {
			return nil, err
		}
		mounts[serviceAccountDir] = src
	}
	host, err := url.Parse(e.Config.Host)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ()[:0:0], "PATH="+os.Getenv("PATH"),
		"KUBERNETES_SERVICE_HOST="+host.Hostname(), "KUBERNETES_SERVICE_PORT="+host.Port())
	for _, v := range ctr.Env {
		if v.ValueFrom != nil {
			return nil, fmt.Errorf("the autoscaler's env %s comes from %v, which RunAutoscaler does not resolve", v.Name, v.ValueFrom)
		}
		env = append(env, v.Name+"="+v.Value)
	}
	if len(ctr.Command) != 1 || ctr.Command[0] != autoscaler.Command {
		return nil, fmt.Errorf("the autoscaler's command is %q, want the image's %s", ctr.Command, autoscaler.Command)
	}
	// unshare gives the process a private mount namespace; the bind mounts in it are
	// what the kubelet mounts into the container, seen by nothing else.
	script := []string{"set -e"}
	args := []string{}
	i := 1
	for path, src := range mounts {
		script = append(script, fmt.Sprintf(`mkdir -p "$%d" && mount --bind "$%d" "$%d"`, i+1, i, i+1))
		args = append(args, src, path)
		i += 2
	}
	script = append(script, fmt.Sprintf(`shift %d`, len(args)), `exec "$@"`)
	cmdArgs := append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", strings.Join(script, "\n"), "sh"}, args...)
	// The one thing a process outside a Pod cannot have: a network namespace of its own,
	// where the metrics and health-check port is free. Every autoscaler of the suite
	// gets a free loopback port instead.
	port, err := localrun.FreePort()
	if err != nil {
		return nil, err
	}
	cmdArgs = append(cmdArgs, bin)
	cmdArgs = append(cmdArgs, ctr.Args...)
	cmdArgs = append(cmdArgs, fmt.Sprintf("--address=127.0.0.1:%d", port))
	cmd := exec.Command("unshare", cmdArgs...)
	cmd.Env = env
	p, err := localrun.StartProcess("cluster-autoscaler "+cluster.String(), filepath.Join(dir, "cluster-autoscaler.log"), cmd)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	if err := e.reportAvailable(ctx, dep, ctr, port); err != nil {
		return nil, err
	}
	return p, nil
}

// probeClient probes as the kubelet does: a probe that does not answer in a second fails.
var probeClient = &http.Client{Timeout: time.Second}

// reportAvailable plays the kubelet's part once the process answers the container's
// probe (its readiness probe, or its liveness probe): the Deployment's Pod, which the
// management cluster's controllers made and no kubelet runs, is reported Running and
// Ready, as the kubelet reports the Pod it runs; the ReplicaSet and Deployment
// controllers then count it available, as they would.
func (e *Env) reportAvailable(ctx context.Context, dep *appsv1.Deployment, ctr corev1.Container, port int) error {
	probe := ctr.ReadinessProbe
	if probe == nil {
		probe = ctr.LivenessProbe
	}
	if probe == nil || probe.HTTPGet == nil {
		return fmt.Errorf("the autoscaler's container has no HTTP probe to tell it is up")
	}
	addr := fmt.Sprintf("http://127.0.0.1:%d%s", port, probe.HTTPGet.Path)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := probeClient.Get(addr)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("the autoscaler never answered its probe %s: %w", addr, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.Client.List(ctx, &pods, client.InNamespace(dep.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return false, err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if !pod.DeletionTimestamp.IsZero() {
				continue
			}
			now := metav1.Now()
			pod.Status.Phase = corev1.PodRunning
			pod.Status.StartTime = &now
			pod.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ctr.Name, Image: ctr.Image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
			if err := e.Client.Status().Update(ctx, pod); err != nil {
				return false, nil // changed meanwhile: read again
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the autoscaler Deployment's Pod was never there to report Running: %w", err)
	}
	return nil
}

// volumeFiles writes the files of the volume a mount names into dir, as the kubelet
// projects a Secret volume (its items, or every key).
func (e *Env) volumeFiles(ctx context.Context, namespace string, volumes []corev1.Volume, m corev1.VolumeMount, dir string) (string, error) {
	for _, v := range volumes {
		if v.Name != m.Name {
			continue
		}
		if v.Secret == nil {
			return "", fmt.Errorf("the autoscaler's volume %s is not a Secret, which RunAutoscaler does not project", v.Name)
		}
		s := &corev1.Secret{}
		if err := e.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: v.Secret.SecretName}, s); err != nil {
			return "", fmt.Errorf("the Secret %s of the autoscaler's volume %s: %w", v.Secret.SecretName, v.Name, err)
		}
		files := map[string][]byte{}
		if len(v.Secret.Items) == 0 {
			for k, b := range s.Data {
				files[k] = b
			}
		}
		for _, it := range v.Secret.Items {
			b, ok := s.Data[it.Key]
			if !ok {
				return "", fmt.Errorf("the Secret %s has no key %s for the autoscaler's volume %s", s.Name, it.Key, v.Name)
			}
			files[it.Path] = b
		}
		return dir, writeFiles(dir, files)
	}
	return "", fmt.Errorf("the autoscaler mounts the volume %s, which its Pod does not have", m.Name)
}
