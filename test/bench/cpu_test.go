package main

import (
	"os"
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 130.
	line := "4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 12 0 99 0 0\n"
	got, err := statCPU(4242, line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3800 * time.Millisecond; got != want {
		t.Errorf("statCPU = %v, want %v", got, want)
	}
	if _, err := statCPU(1, "1 (x) S 1 2"); err == nil {
		t.Error("statCPU of a short line: no error")
	}
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Errorf("procCPU of this process: %v", err)
	}
}

func TestStatSteal(t *testing.T) {
	stat := "cpu  3199379 1135469 1010250 2168104 48116 0 91306 85351 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
	got, err := statSteal(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 853510 * time.Millisecond; got != want {
		t.Errorf("statSteal = %v, want %v", got, want)
	}
	if _, err := statSteal("cpu 1 2 3\n"); err == nil {
		t.Error("statSteal of a short line: no error")
	}
	if _, err := machineSteal(); err != nil {
		t.Errorf("machineSteal on this machine: %v", err)
	}
}
