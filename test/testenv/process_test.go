package testenv

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestProcessReadyLineAndStop(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	p, err := StartProcess(t.Context(), ProcessOptions{
		Path: "sh", Args: []string{"-c", `echo starting; echo '"Starting workers"'; exec sleep 60`},
		LogPath: log, ReadyLine: `"Starting workers"`, ReadyTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.ReadyAt.Before(p.Started) {
		t.Errorf("ready at %v, before its start at %v", p.ReadyAt, p.Started)
	}
	err = p.Stop(syscall.SIGTERM)
	if !EndedBySignal(err) {
		t.Errorf("Stop after SIGTERM = %v, want the exit of a process a signal ended", err)
	}
	if again := p.Stop(syscall.SIGTERM); again != err { //nolint:errorlint // the very error the first Stop returned

		t.Errorf("a second Stop = %v, want the first's %v", again, err)
	}
	if got := p.Tail(2); got != "starting\n\"Starting workers\"" {
		t.Errorf("Tail(2) = %q, want the two lines it printed", got)
	}
}

func TestProcessExitsBeforeReady(t *testing.T) {
	_, err := StartProcess(t.Context(), ProcessOptions{
		Path: "sh", Args: []string{"-c", "echo no luck; exit 3"},
		LogPath: filepath.Join(t.TempDir(), "p.log"), ReadyLine: "never printed", ReadyTimeout: 10 * time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "no luck") {
		t.Errorf("StartProcess of a process that exits = %v, want an error saying so with its log", err)
	}
}

func TestProcessKilledAfterGrace(t *testing.T) {
	p, err := LaunchProcess(ProcessOptions{
		Path: "sh", Args: []string{"-c", "trap '' TERM; echo up; while :; do sleep 0.1; done"},
		LogPath: filepath.Join(t.TempDir(), "p.log"), StopGrace: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The trap must be set before the signal: wait for the echo after it.
	err = Poll(t.Context(), 10*time.Second, 20*time.Millisecond, func(context.Context) error {
		if log, _ := p.Log(); !strings.Contains(log, "up") {
			return errors.New("not up yet")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(syscall.SIGTERM); !errors.Is(err, ErrKilled) {
		t.Errorf("Stop of a process that ignores SIGTERM = %v, want ErrKilled", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Error("Stop returned before the process exited")
	}
}
