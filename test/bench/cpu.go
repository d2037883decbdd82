package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// The CPU time the cluster's kube-apiserver and etcd spend in a scenario,
// read from /proc/<pid>/stat (utime + stime) just before its trigger and
// just after its goal is seen: the measured window, without the settle
// that follows it.

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every architecture Linux and Go share but alpha.
const clockTick = 100

// cpuTimes is the CPU time of the API server, of etcd and of the
// contender's controller process.
type cpuTimes struct {
	api, etcd time.Duration
	ok        bool // both processes were found and read
	// ctrl is the CPU time of the controller's process: podset-operator's
	// subprocess, or the kube-controller-manager for ReplicaSet,
	// Deployment and StatefulSet; ctrlOK is false for the contenders that
	// run in the benchmark's own process (the limit, the tutorial).
	ctrl   time.Duration
	ctrlOK bool
	// steal is the time the machine's virtual CPUs waited for the host
	// (/proc/stat's steal, all CPUs together): CPU the window lost to
	// whatever else the host ran, which no contender's figure shows;
	// stealOK is false where it cannot be read.
	steal   time.Duration
	stealOK bool
}

func (a cpuTimes) sub(b cpuTimes) cpuTimes {
	return cpuTimes{api: a.api - b.api, etcd: a.etcd - b.etcd, ok: a.ok && b.ok,
		ctrl: a.ctrl - b.ctrl, ctrlOK: a.ctrlOK && b.ctrlOK,
		steal: a.steal - b.steal, stealOK: a.stealOK && b.stealOK}
}

// machineSteal is the steal time of all the machine's CPUs so far.
func machineSteal() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return statSteal(string(raw))
}

// statSteal is the steal time of /proc/stat's first line ("cpu user nice
// system idle iowait irq softirq steal ..."), in USER_HZ ticks.
func statSteal(s string) (time.Duration, error) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: no steal in %q", line)
	}
	n, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/stat: %w", err)
	}
	return time.Duration(n) * time.Second / clockTick, nil
}

// controlPlane finds the cluster's kube-apiserver and etcd processes once:
// the binary runtime of kwokctl runs them on this machine, with the
// cluster's folder (…/clusters/podset-bench/…) in their arguments.
type controlPlane struct {
	once      sync.Once
	api, etcd int // PIDs, 0 when not found
	kcmOnce   sync.Once
	kcm       int32
}

// cpu reads the CPU time of the cluster's API server and etcd; ok is false
// when either process cannot be found or read (a cluster not run by the
// binary runtime, or not on this machine).
func (c *cluster) cpu() cpuTimes {
	cp := &c.procs
	cp.once.Do(func() {
		cp.api, cp.etcd = findProcess("kube-apiserver"), findProcess("etcd")
		if cp.api == 0 || cp.etcd == 0 {
			logf("control-plane CPU: no kube-apiserver (pid %d) or etcd (pid %d) of the %s cluster in /proc: the CPU column stays empty", cp.api, cp.etcd, clusterName)
		} else {
			logf("control-plane CPU: kube-apiserver pid %d, etcd pid %d", cp.api, cp.etcd)
		}
	})
	if cp.api == 0 || cp.etcd == 0 {
		return cpuTimes{}
	}
	api, err1 := procCPU(cp.api)
	etcd, err2 := procCPU(cp.etcd)
	if err1 != nil || err2 != nil {
		return cpuTimes{}
	}
	t := cpuTimes{api: api, etcd: etcd, ok: true}
	if steal, err := machineSteal(); err == nil {
		t.steal, t.stealOK = steal, true
	}
	if pid := c.ctrlPID.Load(); pid != 0 {
		var err error
		t.ctrl, err = procCPU(int(pid))
		t.ctrlOK = err == nil
	}
	return t
}

// controllerManager is the PID of the cluster's kube-controller-manager,
// whose CPU is that of the ReplicaSet, Deployment and StatefulSet
// controllers: in the measured window nothing else asks it for work (no
// Services, no Jobs; the garbage collector only watches). 0 when not found.
func (c *cluster) controllerManager() int32 {
	c.procs.kcmOnce.Do(func() {
		c.procs.kcm = int32(findProcess("kube-controller-manager"))
		if c.procs.kcm == 0 {
			logf("controller CPU: no kube-controller-manager of the %s cluster in /proc: the ReplicaSet and StatefulSet controller CPU stays empty", clusterName)
		}
	})
	return c.procs.kcm
}

// findProcess is the PID of the process whose executable is named name
// and whose arguments name the benchmark cluster's folder; 0 when there is
// none, or more than one.
func findProcess(name string) int {
	marker := string(filepath.Separator) + filepath.Join("clusters", clusterName) + string(filepath.Separator)
	pids, _, err := testenv.Processes(name, func(args []string) bool { return strings.Contains(strings.Join(args, " "), marker) })
	if err != nil || len(pids) != 1 {
		return 0
	}
	return pids[0]
}

// procCPU is a process's user plus system CPU time.
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return statCPU(pid, string(raw))
}

// statCPU is utime + stime of a /proc/<pid>/stat line.
func statCPU(pid int, s string) (time.Duration, error) {
	// The command name, in parentheses, may hold spaces: the fields
	// counted in proc(5) resume after its closing parenthesis, with the
	// state (field 3); utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var ticks int64
	for _, x := range f[11:13] {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTick, nil
}

// cpuPer1000 is the cell of the CPU column: the API server's, etcd's and
// the controller's CPU seconds per 1000 pods of the scenario.
func cpuPer1000(m *measurement) string {
	if m == nil || m.skipped || m.err != nil || m.cutoff || !m.cpu.ok || m.pods <= 0 {
		return "—"
	}
	per := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()*1000/float64(m.pods)) }
	ctrl := "—"
	if m.cpu.ctrlOK {
		ctrl = per(m.cpu.ctrl)
	}
	return per(m.cpu.api) + " / " + per(m.cpu.etcd) + " / " + ctrl
}

// cpuLog is the CPU part of a measurement's log line.
func (m *measurement) cpuLog() string {
	if !m.cpu.ok {
		return ""
	}
	s := fmt.Sprintf("; CPU: kube-apiserver %.2f s, etcd %.2f s", m.cpu.api.Seconds(), m.cpu.etcd.Seconds())
	if m.cpu.ctrlOK {
		s += fmt.Sprintf(", controller %.2f s", m.cpu.ctrl.Seconds())
	}
	if m.cpu.stealOK {
		s += fmt.Sprintf(", stolen by the host %.2f s", m.cpu.steal.Seconds())
	}
	if m.peakHeap > 0 {
		s += fmt.Sprintf("; operator: %d passes, peak heap %s", m.passes, mib(m.peakHeap))
	}
	return s
}
