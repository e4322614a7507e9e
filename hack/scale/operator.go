package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
)

// operator is the operator binary running as the chart's ServiceAccount.
type operator struct {
	cmd     *exec.Cmd
	logPath string
	metrics string // host:port of its metrics endpoint
	pprof   string // host:port of its pprof endpoint
	done    chan struct{}
	err     error
}

// startOperator starts the operator; a syncPeriod of 0 keeps its default.
func (h *harness) startOperator(ctx context.Context, syncPeriod time.Duration) error {
	kubeconfig := filepath.Join(h.cfg.Work, "operator.kubeconfig")
	if err := localrun.ServiceAccountKubeconfig(ctx, h.env.Config, kubeconfig, 24*time.Hour); err != nil {
		return err
	}
	addrs := make([]string, 3)
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return err
		}
		addrs[i] = a
	}
	op := &operator{metrics: addrs[0], pprof: addrs[2], done: make(chan struct{})}
	args := []string{
		"--kubeconfig", kubeconfig,
		"--leader-elect=true", "--leader-election-namespace", localrun.ReleaseNamespace,
		"--metrics-bind-address", op.metrics,
		"--health-probe-bind-address", addrs[1],
		"--pprof-bind-address", op.pprof,
		// The local API server cannot call back into a local process by Service name.
		"--enable-webhook=false",
		"--concurrency", strconv.Itoa(h.cfg.Concurrency),
	}
	if syncPeriod > 0 {
		args = append(args, "--sync-period", syncPeriod.String())
	}
	h.runs++
	op.logPath = filepath.Join(h.cfg.Work, fmt.Sprintf("operator-%d.log", h.runs))
	op.cmd = exec.Command(filepath.Join(h.cfg.Work, "nodegroup-operator"), args...)
	logFile, err := os.Create(op.logPath)
	if err != nil {
		return err
	}
	op.cmd.Stdout, op.cmd.Stderr = logFile, logFile
	if err := op.cmd.Start(); err != nil {
		_ = logFile.Close()
		return err
	}
	go func() {
		op.err = op.cmd.Wait()
		_ = logFile.Close()
		close(op.done)
	}()
	h.op = op
	return nil
}

// syncPeriod spreads the steady state's full resyncs over its window.
func (h *harness) syncPeriod() time.Duration {
	return h.cfg.Steady / time.Duration(h.cfg.Resyncs)
}

func (o *operator) pid() int { return o.cmd.Process.Pid }

// usage is the operator's peak memory and CPU time so far, and its memory now.
func (o *operator) usage() Usage {
	m := memory(o.pid())
	return Usage{PeakRSSMiB: m.peak, RSSAnonMiB: m.anon, RSSFileMiB: m.file, CPUSeconds: cpuSeconds(o.pid())}
}

// alive fails when the operator exited.
func (o *operator) alive() error {
	select {
	case <-o.done:
		return fmt.Errorf("the operator exited (%v); its log: %s", o.err, o.logPath)
	default:
		return nil
	}
}

// stop asks the operator to stop (SIGTERM, as the kubelet does) and kills it after a
// grace period.
func (o *operator) stop(grace time.Duration) {
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(grace):
		o.kill()
	}
}

func (o *operator) kill() {
	select {
	case <-o.done:
		return
	default:
	}
	_ = o.cmd.Process.Kill()
	<-o.done
}

// controllerMetrics are a controller's figures from the operator's metrics.
type controllerMetrics struct {
	// reconciles is controller_runtime_reconcile_total, all results summed.
	reconciles float64
	// queued and active are workqueue_depth and controller_runtime_active_workers.
	queued, active float64
}

// idle: the controller has nothing queued and nothing running.
func (m controllerMetrics) idle() bool { return m.queued == 0 && m.active == 0 }

// metricsOf reads a controller's figures from the operator's metrics endpoint.
func (o *operator) metricsOf(ctx context.Context, controller string) (controllerMetrics, error) {
	var m controllerMetrics
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.metrics+"/metrics", nil)
	if err != nil {
		return m, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, err
	}
	defer func() { _ = resp.Body.Close() }()
	series := []struct {
		prefix string
		into   *float64
	}{
		{`controller_runtime_reconcile_total{controller="` + controller + `",`, &m.reconciles},
		{`workqueue_depth{controller="` + controller + `",`, &m.queued},
		{`controller_runtime_active_workers{controller="` + controller + `"}`, &m.active},
	}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		for _, x := range series {
			if !strings.HasPrefix(line, x.prefix) {
				continue
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				return m, fmt.Errorf("metrics line %q: %w", line, err)
			}
			*x.into += v
		}
	}
	return m, s.Err()
}

// reconciles is the controller's reconcile count so far.
func (o *operator) reconciles(ctx context.Context, controller string) (float64, error) {
	m, err := o.metricsOf(ctx, controller)
	return m.reconciles, err
}

// profile saves a pprof profile of the operator (path: "heap", "profile?seconds=20").
func (o *operator) profile(ctx context.Context, path, file string) error {
	return saveProfile(ctx, http.DefaultClient, "http://"+o.pprof, path, file)
}

// saveProfile saves the pprof profile path of the server at base into file.
func saveProfile(ctx context.Context, c *http.Client, base, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s", path, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// childPID is the process ID of a child of this process with the command name name
// (envtest starts kube-apiserver and etcd as children); 0 when there is none.
func childPID(name string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, fields, ok := procStat(pid)
		if !ok || comm != name {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
			return pid
		}
	}
	return 0
}

// procStat reads /proc/<pid>/stat: the command name and the fields after it (state is
// fields[0], as field 3 of proc(5)).
func procStat(pid int) (comm string, fields []string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	return s[open+1 : end], strings.Fields(s[end+1:]), true
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc: 100 on Linux.
const clockTicks = 100

// cpuSeconds is a process's user and system CPU time so far.
func cpuSeconds(pid int) float64 {
	_, f, ok := procStat(pid)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64) // field 14
	stime, _ := strconv.ParseFloat(f[12], 64) // field 15
	return (utime + stime) / clockTicks
}

// rss is a process's resident memory in MiB, from /proc/<pid>/status: at its peak
// (VmHWM), and now split into anonymous memory (the Go heap and stacks) and file-backed
// pages (the binary's code and data).
type rss struct{ peak, anon, file float64 }

func memory(pid int) rss {
	var m rss
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			m.peak = kb / 1024
		case "RssAnon":
			m.anon = kb / 1024
		case "RssFile":
			m.file = kb / 1024
		}
	}
	return m
}
