package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is a binary the environment runs, logging to <work>/<name>.log.
type process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	// exited closes when the process ends; err is how it ended.
	exited chan struct{}
	err    error
}

func startProcess(work, name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(work, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so a stop reaches it and whatever it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{Name: name, Log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Running reports whether the process is still running.
func (p *process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop ends the process: SIGTERM, then SIGKILL after the grace period.
func (p *process) Stop(grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// tail is the end of the process's log, for an error message.
func (p *process) tail() string {
	data, _ := os.ReadFile(p.Log)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}
