package localrun

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a binary a local run started, its output appended to a log file.
type Process struct {
	Name string
	// Log is the file its standard output and error go to.
	Log string
	cmd *exec.Cmd
	// exited closes when the process ends; err is how it ended.
	exited chan struct{}
	err    error
}

// StartProcess starts cmd as name, appending its output to the file log, in its own
// process group (so a stop reaches whatever it starts too). Other attributes cmd has,
// such as the credentials to run as, are kept.
func StartProcess(name, log string, cmd *exec.Cmd) (*Process, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Log: log, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Start starts the operator binary bin with c as name, logging to log, and waits until
// it is ready (ReadyURL answers 200) for at most timeout; it stops the process if not.
func (c *Command) Start(ctx context.Context, name, bin, log string, timeout time.Duration) (*Process, error) {
	p, err := StartProcess(name, log, c.Cmd(bin))
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(ctx, c.ReadyURL(), timeout); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited closes when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process is still running.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Alive fails, with the end of its log, when the process has ended.
func (p *Process) Alive() error {
	if p.Running() {
		return nil
	}
	return fmt.Errorf("%s exited (%v); the end of its log %s:\n%s", p.Name, p.err, p.Log, p.Tail())
}

// Stop ends the process as a kubelet ends a container: SIGTERM, then SIGKILL after the
// grace period.
func (p *Process) Stop(grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill ends the process at once (SIGKILL) and waits for it.
func (p *Process) Kill() {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// Tail is the end of the process's log, for an error message.
func (p *Process) Tail() string {
	data, _ := os.ReadFile(p.Log)
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}

// WaitReady waits until url answers 200, for at most timeout; it fails at once, with
// the end of the log, when the process ends.
func (p *Process) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	return p.WaitReadyWith(ctx, &http.Client{}, url, timeout)
}

// WaitReadyWith is WaitReady asking with hc (one that trusts the process's own CA, say);
// each request is bounded to 2 s.
func (p *Process) WaitReadyWith(ctx context.Context, hc *http.Client, url string, timeout time.Duration) error {
	hc.Timeout = 2 * time.Second
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for {
		if err := p.Alive(); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (%s: %s); the end of its log %s:\n%s", p.Name, timeout, url, last, p.Log, p.Tail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
