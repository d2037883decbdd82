package localcluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultName is the cluster of `make run`.
const DefaultName = "podset"

// Cluster is a local kwok cluster and how it is made. The same Cluster
// starts it, finds it and deletes it.
type Cluster struct {
	// Name is kwokctl's name of the cluster: "podset" for `make run`,
	// "podset-e2e", "podset-bench", "podset-node" for the suites.
	Name string
	// Root is the repository root: the cluster's files are under
	// Root/bin/kwok-work (kwokctl's KWOK_WORKDIR), its pod stages are read
	// from Root/hack/kwok/stages.
	Root string
	// ControlPlane is the folder of kube-apiserver, etcd,
	// kube-controller-manager, kube-scheduler and kubectl.
	ControlPlane string
	// Kwok is the folder of kwok and kwokctl.
	Kwok string
	// Nodes is how many fake nodes Up keeps (110 pods each).
	Nodes int
	// HeartbeatFactor is kwokctl's heartbeatFactor, 0 for kwokctl's
	// default (5): it scales kwok's node Lease duration and
	// kube-controller-manager's --node-monitor-period and
	// --node-monitor-grace-period (40s at 1). The end-to-end suite sets 0.5,
	// so that a node whose heartbeat stops is lost within about 20 seconds,
	// not 200.
	HeartbeatFactor float64
	// DisableQPSLimits lifts the components' client QPS limits (the
	// benchmark).
	DisableQPSLimits bool
	// WithoutPodDelete leaves out kwok's pod-delete stage (the benchmark,
	// whose pods have a grace period of 0); the other stages stay.
	WithoutPodDelete bool
	// Controllers are the kube-controller-manager's --controllers; none
	// for all of them.
	Controllers []string
	// AuditPolicy is the path of kube-apiserver's audit policy; empty for
	// no audit log. The log is clusters/<Name>/logs/audit.log of WorkDir.
	AuditPolicy string
	// Log receives the cluster's progress (a cluster recreated, and why)
	// and, unless ToolLog is set, the output of kwokctl and kubectl; nil
	// discards it. A failed command's error carries the end of its output
	// either way.
	Log io.Writer
	// ToolLog, if set, receives the output of kwokctl and kubectl instead
	// of Log: `make run` keeps it in .logs/cluster.log, so that the
	// terminal shows what the project says.
	ToolLog io.Writer
}

// WorkDir is kwokctl's work folder (KWOK_WORKDIR), shared by every local
// cluster.
func (c Cluster) WorkDir() string { return filepath.Join(c.Root, "bin", "kwok-work") }

// Kubeconfig is the path of the cluster's admin kubeconfig, which Up
// writes.
func (c Cluster) Kubeconfig() string { return filepath.Join(c.WorkDir(), c.Name+".kubeconfig") }

// configPath is the kwokctl configuration the cluster was made with.
func (c Cluster) configPath() string { return filepath.Join(c.WorkDir(), c.Name+".yaml") }

// Up starts the cluster, or restarts or reuses the one there is when it was
// made with the same configuration and answers, and keeps Nodes fake nodes
// Ready. It returns the kubeconfig's path.
func (c Cluster) Up(ctx context.Context) (string, error) {
	if err := c.validate(true); err != nil {
		return "", err
	}
	if err := c.checkKwokVersion(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(c.WorkDir(), 0o755); err != nil {
		return "", err
	}
	config, err := c.configuration()
	if err != nil {
		return "", err
	}
	exists, err := c.Exists(ctx)
	if err != nil {
		return "", err
	}
	if exists {
		reused, err := c.reuse(ctx, config)
		if err != nil {
			return "", err
		}
		if reused {
			return c.Kubeconfig(), nil
		}
	}
	if err := os.WriteFile(c.configPath(), config, 0o644); err != nil {
		return "", err
	}
	if err := c.create(ctx); err != nil {
		return "", err
	}
	if err := c.waitControllers(ctx); err != nil {
		// Seen once in CI: a new cluster whose controllers never acted (a
		// Deployment stayed at 0 of 1 replicas for minutes). Its logs say
		// why; a second cluster is made instead of failing the caller.
		first := c.controllerManagerLog(ctx)
		c.logf("the kube-controller-manager of cluster %s does not run its controllers; its log ends:\n%s\nrecreating cluster %s", c.Name, first, c.Name)
		c.deleteCluster(ctx)
		if err := c.create(ctx); err != nil {
			return "", err
		}
		if err := c.waitControllers(ctx); err != nil {
			return "", fmt.Errorf("the kube-controller-manager of cluster %s does not run its controllers, twice: %w\nthe first one's log ended:\n%s\nthe second one's:\n%s",
				c.Name, err, first, c.controllerManagerLog(ctx))
		}
	}
	if err := c.scaleNodes(ctx); err != nil {
		return "", err
	}
	return c.Kubeconfig(), nil
}

// reuse starts the existing cluster when it was made with config and keeps
// its nodes, and reports whether it did; it deletes a cluster made with
// another configuration (an older version of this package: other stages,
// other binaries) or that does not answer, which would not behave as this
// one says.
func (c Cluster) reuse(ctx context.Context, config []byte) (bool, error) {
	if !c.madeWith(config) {
		c.logf("cluster %s was made with another configuration; recreating it", c.Name)
		c.deleteCluster(ctx)
		return false, nil
	}
	// A start that fails shows as a cluster that does not answer.
	succeeds(c.kwokctl(ctx, "start", "cluster"))
	if !succeeds(c.kubectl(ctx, "get", "--raw", "/readyz")) {
		c.logf("cluster %s does not answer; recreating it", c.Name)
		c.deleteCluster(ctx)
		return false, nil
	}
	return true, c.scaleNodes(ctx)
}

// Down deletes the cluster, if there is one, and its files.
func (c Cluster) Down(ctx context.Context) error {
	if err := c.validate(false); err != nil {
		return err
	}
	exists, err := c.Exists(ctx)
	if err != nil {
		return err
	}
	if exists {
		if err := c.run(c.kwokctl(ctx, "delete", "cluster")); err != nil {
			return err
		}
	}
	for _, f := range []string{c.Kubeconfig(), c.configPath()} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Exists reports whether kwokctl has the cluster, running or stopped.
func (c Cluster) Exists(ctx context.Context) (bool, error) {
	// Every cluster of the work folder, not only this one.
	out, err := c.command(ctx, filepath.Join(c.Kwok, "kwokctl"), "get", "clusters").Output()
	if err != nil {
		return false, fmt.Errorf("kwokctl get clusters: %w", err)
	}
	return slices.Contains(strings.Fields(string(out)), c.Name), nil
}

// validate fails on a Cluster that misses what Up (full) or Down needs.
func (c Cluster) validate(full bool) error {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"Name", c.Name}, {"Root", c.Root}, {"Kwok", c.Kwok}, {"ControlPlane", c.ControlPlane},
	} {
		if f.value == "" && (full || f.name != "ControlPlane") {
			missing = append(missing, f.name)
		}
	}
	if full && c.Nodes < 1 {
		missing = append(missing, "Nodes")
	}
	if len(missing) > 0 {
		return fmt.Errorf("localcluster: set %s", strings.Join(missing, ", "))
	}
	return nil
}

// create makes the cluster from its configuration file and waits up to two
// minutes for it, holding LockCreation.
func (c Cluster) create(ctx context.Context) error {
	unlock, err := c.LockCreation()
	if err != nil {
		return err
	}
	defer unlock()
	return c.run(c.kwokctl(ctx, "create", "cluster", "--config", c.configPath(), "--kubeconfig", c.Kubeconfig(), "--wait", "2m"))
}

// LockCreation waits until no process is creating a cluster in WorkDir,
// and keeps any from starting until unlock is called. kwokctl gives a new
// cluster the ports it finds free, probing down from 32767 afresh in every
// process: two clusters created at once (make test runs the real node's
// suite beside the end-to-end one) would be given the same ports, and a
// cluster created while a component of another is stopped would take that
// component's port. Only Root is needed.
func (c Cluster) LockCreation() (unlock func(), err error) {
	if err := os.MkdirAll(c.WorkDir(), 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(c.WorkDir(), "create.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	return func() { _ = lock.Close() }, nil // closing it releases the lock
}

// waitControllers waits up to a minute for the kube-controller-manager to
// run its controllers: its service account controller gives every
// namespace, default included, a ServiceAccount named default.
func (c Cluster) waitControllers(ctx context.Context) error {
	for range 60 {
		if succeeds(c.kubectl(ctx, "get", "serviceaccount", "default", "--namespace", "default")) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return errors.New("no ServiceAccount default in the namespace default after a minute")
}

// scaleNodes keeps Nodes fake nodes and waits for every node to be Ready.
func (c Cluster) scaleNodes(ctx context.Context) error {
	if err := c.run(c.kwokctl(ctx, "scale", "node", "--replicas", strconv.Itoa(c.Nodes))); err != nil {
		return err
	}
	return c.run(c.kubectl(ctx, "wait", "--for=condition=Ready", "node", "--all", "--timeout=60s"))
}

// command runs bin in the cluster's work folder: kwokctl finds its clusters
// through KWOK_WORKDIR, and kubectl keeps its cache there too.
func (c Cluster) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.WorkDir(), "KUBECACHEDIR="+filepath.Join(c.WorkDir(), "cache"))
	return cmd
}

// kwokctl is kwokctl for this cluster.
func (c Cluster) kwokctl(ctx context.Context, args ...string) *exec.Cmd {
	return c.command(ctx, filepath.Join(c.Kwok, "kwokctl"), append([]string{"--name", c.Name}, args...)...)
}

// kubectl is kubectl with the cluster's kubeconfig.
func (c Cluster) kubectl(ctx context.Context, args ...string) *exec.Cmd {
	return c.command(ctx, filepath.Join(c.ControlPlane, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
}

// run runs cmd with its output going to ToolLog, or Log; its error ends
// with the last 20 lines of that output.
func (c Cluster) run(cmd *exec.Cmd) error {
	var out bytes.Buffer
	w := io.Writer(&out)
	if log := cmp.Or[io.Writer](c.ToolLog, c.Log); log != nil {
		w = io.MultiWriter(&out, log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(cmd.Path), strings.Join(cmd.Args[1:], " "), err, lastLines(out.String(), 20))
	}
	return nil
}

// succeeds runs cmd without its output and reports whether it exited 0.
func succeeds(cmd *exec.Cmd) bool { return cmd.Run() == nil }

// deleteCluster deletes the cluster before it is made again; whatever
// stops that shows in the create that follows.
func (c Cluster) deleteCluster(ctx context.Context) {
	succeeds(c.kwokctl(ctx, "delete", "cluster"))
}

// controllerManagerLog is the end of the kube-controller-manager's log,
// or why it cannot be read.
func (c Cluster) controllerManagerLog(ctx context.Context) string {
	out, err := c.kwokctl(ctx, "logs", "kube-controller-manager").CombinedOutput()
	if err != nil {
		out = append(out, err.Error()...)
	}
	return lastLines(string(out), 20)
}

// madeWith reports whether the cluster was made with config. One whose
// configuration cannot be read (none was recorded, or it is gone) was not.
func (c Cluster) madeWith(config []byte) bool {
	old, err := os.ReadFile(c.configPath())
	return err == nil && bytes.Equal(old, config)
}

// logf writes a line to Log.
func (c Cluster) logf(format string, args ...any) {
	if c.Log != nil {
		_, _ = fmt.Fprintf(c.Log, format+"\n", args...) // progress only: a lost line is not a failure
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
