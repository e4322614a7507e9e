package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/metrics"
)

// operator is the operator binary, run as the chart's Deployment runs it
// (localrun.Command) under the chart's ServiceAccount.
type operator struct {
	*localrun.Process
	cmd *localrun.Command
	// token is a scraper's with the chart's metrics reader role.
	token string
}

// values are the chart values of a run: the operator's certificate valid for the
// loopback URL, the benchmark's concurrency and, when not 0, the sync period; pprof
// only when profiles are asked for, so a run without them is the chart's default.
func (h *harness) values(syncPeriod time.Duration) map[string]any {
	v := map[string]any{
		"concurrency": h.cfg.Concurrency,
		"pprof":       map[string]any{"enabled": h.cfg.Profiles != ""},
		"apiPriority": map[string]any{"enabled": !h.cfg.NoAPIPriority},
	}
	if syncPeriod > 0 {
		v["syncPeriod"] = syncPeriod.String()
	}
	return localrun.LoopbackValues(v)
}

// startOperator starts the operator with the chart rendered for syncPeriod (0: the
// chart's default) and waits until it is ready.
func (h *harness) startOperator(ctx context.Context, syncPeriod time.Duration) error {
	rel, err := localrun.Render(h.root, h.values(syncPeriod))
	if err != nil {
		return err
	}
	// The same replica restarted, as a container restarts in its Pod.
	cmd, err := rel.Command(localrun.Local{
		Kubeconfig: h.operatorKubeconfig, Dir: filepath.Join(h.cfg.Work, "operator"), WebhookPort: h.webhookPort,
	})
	if err != nil {
		return err
	}
	h.runs++
	p, err := cmd.Start(ctx, "nodegroup-operator", filepath.Join(h.cfg.Work, "nodegroup-operator"),
		filepath.Join(h.cfg.Work, fmt.Sprintf("operator-%d.log", h.runs)), 2*time.Minute)
	if err != nil {
		return err
	}
	h.op = &operator{Process: p, cmd: cmd, token: h.metricsToken}
	return nil
}

// syncPeriod spreads the steady state's full resyncs over its window.
func (h *harness) syncPeriod() time.Duration {
	return h.cfg.Steady / time.Duration(h.cfg.Resyncs)
}

// usage is the operator's peak memory and CPU time so far, and its memory now.
func (o *operator) usage() Usage {
	m := memory(o.Pid())
	return Usage{PeakRSSMiB: m.peak, RSSAnonMiB: m.anon, RSSFileMiB: m.file, CPUSeconds: cpuSeconds(o.Pid())}
}

// controllerMetrics are a controller's figures from the operator's metrics.
type controllerMetrics struct {
	// reconciles and errors are controller_runtime_reconcile_total (all results summed)
	// and controller_runtime_reconcile_errors_total.
	reconciles, errors float64
	// queued and active are workqueue_depth and controller_runtime_active_workers.
	queued, active float64
	// adds and retries are workqueue_adds_total and workqueue_retries_total.
	adds, retries float64
	// latency is workqueue_queue_duration_seconds: how long items waited in the queue.
	latency metrics.Sample
	// pools is nodegroup_operator_pools, all states summed: the pools the operator's
	// cache holds, whatever the controller.
	pools float64
}

// idle: the controller has nothing queued and nothing running.
func (m controllerMetrics) idle() bool { return m.queued == 0 && m.active == 0 }

// metricsOf reads a controller's figures from the operator's metrics endpoint, parsed
// as Prometheus parses a scrape.
func (o *operator) metricsOf(ctx context.Context, controller string) (controllerMetrics, error) {
	text, err := o.cmd.ScrapeMetrics(ctx, o.token)
	if err != nil {
		return controllerMetrics{}, err
	}
	return controllerMetricsOf(text, controller)
}

// controllerMetricsOf reads a controller's figures from a scrape of the operator's
// metrics, parsed as Prometheus parses it.
func controllerMetricsOf(text, controller string) (controllerMetrics, error) {
	var m controllerMetrics
	scraped, err := metrics.Scraped(text)
	if err != nil {
		return m, err
	}
	ofController := map[string]string{"controller": controller}
	for _, x := range []struct {
		name   string
		labels map[string]string
		into   *float64
	}{
		{"controller_runtime_reconcile_total", ofController, &m.reconciles},
		{"controller_runtime_reconcile_errors_total", ofController, &m.errors},
		{"workqueue_depth", ofController, &m.queued},
		{"controller_runtime_active_workers", ofController, &m.active},
		{"workqueue_adds_total", ofController, &m.adds},
		{"workqueue_retries_total", ofController, &m.retries},
		{metrics.Prefix + "pools", nil, &m.pools},
	} {
		samples, err := metrics.Gather(scraped, x.name)
		if err != nil {
			return m, err
		}
		*x.into = metrics.Sum(samples, x.labels)
	}
	latency, err := metrics.Gather(scraped, "workqueue_queue_duration_seconds")
	if err != nil {
		return m, err
	}
	for _, s := range latency {
		if s.Labels["controller"] == controller {
			m.latency = s
		}
	}
	return m, nil
}

// busy is how many items all the operator's controllers hold, queued or in a worker:
// 0 when none of them has work left.
func (o *operator) busy(ctx context.Context) (float64, error) {
	text, err := o.cmd.ScrapeMetrics(ctx, o.token)
	if err != nil {
		return 0, err
	}
	return busyOf(text)
}

// busyOf is busy from a scrape of the operator's metrics.
func busyOf(text string) (float64, error) {
	scraped, err := metrics.Scraped(text)
	if err != nil {
		return 0, err
	}
	var n float64
	for _, name := range []string{"workqueue_depth", "controller_runtime_active_workers"} {
		samples, err := metrics.Gather(scraped, name)
		if err != nil {
			return 0, err
		}
		if len(samples) == 0 {
			// A metric gone from the scrape would read as idle: say so instead.
			return 0, fmt.Errorf("the operator's metrics have no %s", name)
		}
		n += metrics.Sum(samples, nil)
	}
	return n, nil
}

// reconciles is the controller's reconcile count so far.
func (o *operator) reconciles(ctx context.Context, controller string) (float64, error) {
	m, err := o.metricsOf(ctx, controller)
	return m.reconciles, err
}

// profile saves a pprof profile of the operator (path: "heap", "profile?seconds=20").
func (o *operator) profile(ctx context.Context, path, file string) error {
	if o.cmd.Pprof == "" {
		return errors.New("the operator serves no profiles: the chart was rendered with pprof.enabled false")
	}
	return saveProfile(ctx, http.DefaultClient, "http://"+o.cmd.Pprof, path, file)
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
// (VmHWM), now (VmRSS), and now split into anonymous memory (the Go heap and stacks)
// and file-backed pages (the binary's code and data).
type rss struct{ peak, now, anon, file float64 }

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
		case "VmRSS":
			m.now = kb / 1024
		case "RssAnon":
			m.anon = kb / 1024
		case "RssFile":
			m.file = kb / 1024
		}
	}
	return m
}
