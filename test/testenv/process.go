package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The operator (and Flux's kustomize-controller) as a subprocess: how the
// end-to-end, GitOps and real-node suites and the benchmark build, start,
// wait for and stop it; StartOperatorProcess (operatorprocess.go) gives
// the operator its flags and readiness. The envtest suites run it in
// their own process (StartOperatorInProcess), where a test can wrap its
// transport.

// BuildOperator builds the operator binary at out from the repository at
// root. static builds it with the Dockerfile's flags (-trimpath, no cgo),
// for figures that should be the image's (the benchmark); otherwise it is
// built as the test binaries' packages are, so that a cold `make test`
// finds them in the build cache.
func BuildOperator(ctx context.Context, root, out string, static bool) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	if static {
		cmd = exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the operator: %w\n%s", err, b)
	}
	return nil
}

// ProcessOptions says what to run and when it has started.
type ProcessOptions struct {
	// Path and Args are the command; Env is added to this process's
	// environment.
	Path string
	Args []string
	Env  []string
	// LogPath receives its output (stdout and stderr), started anew
	// unless AppendLog.
	LogPath   string
	AppendLog bool
	// The process is ready once ReadyURL answers 200 OK, or once a line
	// of its output contains ReadyLine (for the operator's JSON log,
	// `"Starting workers"`: its caches are synced and it leads). With
	// neither it is ready once started.
	ReadyURL  string
	ReadyLine string
	// ReadyTimeout bounds StartProcess's wait (default two minutes).
	ReadyTimeout time.Duration
	// StopGrace is how long Stop waits after its signal before it kills
	// the process (default 30 seconds).
	StopGrace time.Duration
}

// Process is a started subprocess. Should this process die without
// stopping it (a test timeout), the kernel kills it too.
type Process struct {
	Cmd     *exec.Cmd
	LogPath string
	// Started is when it was started; ReadyAt, once Ready is closed, when
	// it became ready.
	Started time.Time
	ReadyAt time.Time

	opts      ProcessOptions
	ready     chan struct{}
	readyOnce sync.Once
	exited    chan struct{}
	waitErr   error

	stopOnce sync.Once
	stopErr  error
}

// StartProcess starts the process and returns once it is ready. It stops
// the process and returns an error, with the end of its log, when it exits
// first, when ReadyTimeout passes or when ctx ends.
func StartProcess(ctx context.Context, o ProcessOptions) (*Process, error) {
	p, err := LaunchProcess(o)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx); err != nil {
		_ = p.Stop(syscall.SIGTERM)
		return nil, fmt.Errorf("%w (log %s):\n%s", err, p.LogPath, p.Tail(40))
	}
	return p, nil
}

// LaunchProcess starts the process and returns at once; Ready says when it
// is ready.
func LaunchProcess(o ProcessOptions) (*Process, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if o.AppendLog {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	log, err := os.OpenFile(o.LogPath, flags, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Path, o.Args...)
	if o.Env != nil {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &Process{Cmd: cmd, LogPath: o.LogPath, opts: o, ready: make(chan struct{}), exited: make(chan struct{})}
	var out *io.PipeWriter
	if o.ReadyLine != "" {
		var in *io.PipeReader
		in, out = io.Pipe()
		cmd.Stdout, cmd.Stderr = out, out
		go p.copyLog(in, log)
	} else {
		cmd.Stdout, cmd.Stderr = log, log
	}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Path, err)
	}
	if o.ReadyLine == "" {
		_ = log.Close() // the child has its own descriptor
		if o.ReadyURL == "" {
			p.setReady()
		}
	}
	go func() {
		p.waitErr = cmd.Wait()
		if out != nil {
			_ = out.Close() // ends copyLog; a pipe's writer closes without error
		}
		close(p.exited)
	}()
	return p, nil
}

// copyLog copies the output into the log, line by line, and marks the
// process ready at the first line with ReadyLine.
func (p *Process) copyLog(in io.Reader, log *os.File) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		_, _ = fmt.Fprintln(log, line) // a failed write loses only that line of the log
		if strings.Contains(line, p.opts.ReadyLine) {
			p.setReady()
		}
	}
	_ = log.Close()
}

// ErrKilled is Stop's error for a process that did not exit within its
// StopGrace of the signal.
var ErrKilled = errors.New("killed: it did not exit in time after the signal")

func (p *Process) setReady() {
	p.readyOnce.Do(func() {
		p.ReadyAt = time.Now()
		close(p.ready)
	})
}

func (p *Process) waitReady(ctx context.Context) error {
	timeout := p.opts.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if p.opts.ReadyURL != "" {
		err := Poll(ctx, timeout, 250*time.Millisecond, func(ctx context.Context) error {
			select {
			case <-p.exited:
				return fmt.Errorf("%s exited: %v", p.opts.Path, p.waitErr)
			default:
			}
			return HTTPOK(ctx, p.opts.ReadyURL)
		})
		if err == nil {
			p.setReady()
		}
		return err
	}
	select {
	case <-p.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("%s exited before it was ready: %v", p.opts.Path, p.waitErr)
	case <-time.After(timeout):
		return fmt.Errorf("%s: not ready within %v", p.opts.Path, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ready is closed once the process is ready (LaunchProcess with ReadyLine).
func (p *Process) Ready() <-chan struct{} { return p.ready }

// Exited is closed once the process has exited; ExitErr is then its exit
// status.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is the process's exit status, once Exited is closed.
func (p *Process) ExitErr() error { return p.waitErr }

// Stop sends sig, waits StopGrace for the process to exit and kills it
// then. It returns the exit status (an *exec.ExitError for a process
// that the signal ended), or an error saying it was killed. Only the
// first call signals; later ones wait for the exit and return the same.
func (p *Process) Stop(sig syscall.Signal) error {
	if p == nil {
		return nil
	}
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
			p.stopErr = p.waitErr
			return
		default:
		}
		_ = p.Cmd.Process.Signal(sig) // it may have exited since: the wait below says so
		grace := p.opts.StopGrace
		if grace == 0 {
			grace = 30 * time.Second
		}
		select {
		case <-p.exited:
			p.stopErr = p.waitErr
		case <-time.After(grace):
			_ = p.Cmd.Process.Kill()
			<-p.exited
			p.stopErr = fmt.Errorf("%s (PID %d), %v after %v: %w", p.opts.Path, p.Cmd.Process.Pid, grace, sig, ErrKilled)
		}
	})
	<-p.exited
	return p.stopErr
}

// EndedBySignal reports whether err, a Stop's result, is the exit of a
// process that a signal ended rather than one that exited by itself.
func EndedBySignal(err error) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && !exit.Exited()
}

// Log is everything the process has written so far.
func (p *Process) Log() (string, error) {
	data, err := os.ReadFile(p.LogPath)
	return string(data), err
}

// Tail is the last n lines of the process's log, or why it cannot be read.
func (p *Process) Tail(n int) string {
	log, err := p.Log()
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
