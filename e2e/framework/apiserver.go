package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
)

// managementAPIServer is the management kube-apiserver as this package runs it after
// its first stop. envtest cannot start its API server again in place (a stop forgets
// its generated certificates and users), so the first StopAPIServer reads the command
// line, environment and folder of envtest's process from /proc and ends it; every
// StartAPIServer runs that same command line again: the same port, certificates, etcd
// and flags, so every client keeps its address and credentials.
type managementAPIServer struct {
	argv, env []string
	dir       string
	// pid is envtest's process until the first stop; proc is ours after.
	pid  int
	proc *localrun.Process
}

// StopAPIServer stops the management kube-apiserver (SIGTERM, SIGKILL after
// apiserverGrace), leaving etcd and every other process running, and returns once it
// has ended: nothing answers on its address until StartAPIServer.
func (e *Env) StopAPIServer() error {
	if e.apiserver == nil {
		a, err := findAPIServer(e.Config.Host)
		if err != nil {
			return err
		}
		e.apiserver = a
	}
	a := e.apiserver
	if a.proc != nil {
		a.proc.Stop(apiserverGrace)
		return nil
	}
	if a.pid == 0 {
		return nil
	}
	// envtest's own process: its parent (envtest) reaps it; wait until it is gone.
	_ = syscall.Kill(a.pid, syscall.SIGTERM)
	deadline := time.Now().Add(apiserverGrace)
	for alive(a.pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(a.pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.pid = 0
	return nil
}

// StartAPIServer starts the management kube-apiserver StopAPIServer stopped, with the
// same command line, and waits until it is ready.
func (e *Env) StartAPIServer(ctx context.Context) error {
	a := e.apiserver
	if a == nil || a.pid != 0 || (a.proc != nil && a.proc.Running()) {
		return nil
	}
	cmd := exec.Command(a.argv[0], a.argv[1:]...)
	cmd.Env, cmd.Dir = a.env, a.dir
	p, err := localrun.StartProcess("kube-apiserver", filepath.Join(e.Work, "kube-apiserver.log"), cmd)
	if err != nil {
		return err
	}
	a.proc = p
	hc, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	return p.WaitReadyWith(ctx, hc, strings.TrimSuffix(e.Config.Host, "/")+"/readyz", readyTimeout)
}

// stopRestartedAPIServer stops the API server StartAPIServer started (envtest stops its
// own).
func (e *Env) stopRestartedAPIServer() {
	if e.apiserver != nil && e.apiserver.proc != nil {
		e.apiserver.proc.Stop(apiserverGrace)
	}
}

// findAPIServer finds, among this process's children, the kube-apiserver serving host.
func findAPIServer(host string) (*managementAPIServer, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, err
	}
	port := u.Port()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || parent(pid) != self {
			continue
		}
		argv := procList(pid, "cmdline")
		if len(argv) == 0 || filepath.Base(argv[0]) != "kube-apiserver" || !servesPort(argv, port) {
			continue
		}
		dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil {
			return nil, err
		}
		return &managementAPIServer{argv: argv, env: procList(pid, "environ"), dir: dir, pid: pid}, nil
	}
	return nil, errors.New("no kube-apiserver child of this process serves " + host)
}

func servesPort(argv []string, port string) bool {
	for i, a := range argv {
		if a == "--secure-port="+port || (a == "--secure-port" && i+1 < len(argv) && argv[i+1] == port) {
			return true
		}
	}
	return false
}

// parent is the parent process ID of pid (0 when unknown).
func parent(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so read after its last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	var state string
	var ppid int
	if _, err := fmt.Sscan(string(data[i+1:]), &state, &ppid); err != nil {
		return 0
	}
	return ppid
}

// procList reads a NUL-separated list of /proc/<pid>/ (cmdline, environ).
func procList(pid int, name string) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range bytes.Split(bytes.TrimRight(data, "\x00"), []byte{0}) {
		out = append(out, string(f))
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// pointKubeconfig rewrites the kubeconfig at path so its every cluster is server, under
// the certificate authority caData; the credentials stay.
func pointKubeconfig(path, server string, caData []byte) error {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return err
	}
	for _, c := range kc.Clusters {
		c.Server, c.CertificateAuthorityData, c.CertificateAuthority = server, caData, ""
	}
	return clientcmd.WriteToFile(*kc, path)
}
