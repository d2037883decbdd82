package testenv

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"
)

// OperatorProcessOptions is how a suite runs the operator binary as a
// subprocess: the flags a deployment sets (config/manager), when the
// process counts as ready, where it logs and how long its stop waits. The
// end-to-end, GitOps and real-node suites and the benchmark each differ
// only in these, so none of them spells the command line itself.
type OperatorProcessOptions struct {
	// Binary is the operator built by BuildOperator.
	Binary string
	// Kubeconfig is --kubeconfig.
	Kubeconfig string
	// Namespaces is --namespaces, the namespaces it watches; with none
	// the flag is left out and it watches all of them.
	Namespaces []string
	// LeaderElection is --leader-elect, always passed, so that every
	// suite states whether its operator competes for the Lease.
	// LeaderElectionNamespace, when set, is --leader-election-namespace.
	LeaderElection          bool
	LeaderElectionNamespace string
	// MetricsAddress is --metrics-bind-address; empty passes "0", the
	// endpoint off, since most suites do not read it and a fixed port
	// would clash between runs.
	MetricsAddress string
	// LogFormat and LogLevel are --log-format and --log-level, each left
	// out when empty (the binary's defaults: json, info).
	LogFormat, LogLevel string
	// Args come after the flags above, so they override them.
	Args []string
	// Ready says when the process counts as started.
	Ready OperatorReadiness
	// LogPath receives its output, started anew unless AppendLog.
	LogPath   string
	AppendLog bool
	// ReadyTimeout and StopGrace are ProcessOptions' (defaults two
	// minutes and 30 seconds).
	ReadyTimeout time.Duration
	StopGrace    time.Duration
}

// OperatorReadiness is when an operator subprocess counts as started.
type OperatorReadiness int

const (
	// ReadyOnceStarted is at once: for a suite whose tests wait for what
	// they need themselves. The probe server is off.
	ReadyOnceStarted OperatorReadiness = iota
	// ReadyOnProbe is once /readyz answers 200 OK, on a free port of
	// 127.0.0.1 that the probe server is given for it.
	ReadyOnProbe
	// ReadyOnWorkers is once the JSON log says "Starting workers": the
	// caches are synced and, with leader election, it leads. The probe
	// server is off. The benchmark times a start by this line.
	ReadyOnWorkers
)

// workersLine is the text of the operator's JSON log line that
// ReadyOnWorkers waits for: the controller's message once its caches
// have synced, quoted as the JSON encoder writes it.
const workersLine = `"Starting workers"`

// StartOperatorProcess starts the operator and returns once it is ready,
// as StartProcess does.
func StartOperatorProcess(ctx context.Context, o OperatorProcessOptions) (*Process, error) {
	po, err := o.processOptions()
	if err != nil {
		return nil, err
	}
	return StartProcess(ctx, po)
}

// LaunchOperatorProcess starts the operator and returns at once; its
// Ready says when it is ready.
func LaunchOperatorProcess(o OperatorProcessOptions) (*Process, error) {
	po, err := o.processOptions()
	if err != nil {
		return nil, err
	}
	return LaunchProcess(po)
}

// processOptions is the subprocess these options describe, with a free
// address for the probe server when the readiness is its answer.
func (o OperatorProcessOptions) processOptions() (ProcessOptions, error) {
	po := ProcessOptions{
		Path:         o.Binary,
		LogPath:      o.LogPath,
		AppendLog:    o.AppendLog,
		ReadyTimeout: o.ReadyTimeout,
		StopGrace:    o.StopGrace,
	}
	probe := "0"
	switch o.Ready {
	case ReadyOnceStarted:
	case ReadyOnProbe:
		port, err := FreePort()
		if err != nil {
			return po, err
		}
		probe = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		po.ReadyURL = "http://" + probe + "/readyz"
	case ReadyOnWorkers:
		if o.LogFormat != "" && o.LogFormat != "json" {
			return po, errors.New("the operator's readiness on its workers needs the json log format, whose line it matches")
		}
		po.ReadyLine = workersLine
	default:
		return po, errors.New("unknown OperatorReadiness " + strconv.Itoa(int(o.Ready)))
	}
	po.Args = o.args(probe)
	return po, nil
}

// args is the operator's command line with its probe server on probe.
func (o OperatorProcessOptions) args(probe string) []string {
	args := []string{
		"--kubeconfig=" + o.Kubeconfig,
		"--leader-elect=" + strconv.FormatBool(o.LeaderElection),
	}
	if o.LeaderElectionNamespace != "" {
		args = append(args, "--leader-election-namespace="+o.LeaderElectionNamespace)
	}
	metrics := o.MetricsAddress
	if metrics == "" {
		metrics = "0"
	}
	args = append(args, "--metrics-bind-address="+metrics, "--health-probe-bind-address="+probe)
	if o.LogFormat != "" {
		args = append(args, "--log-format="+o.LogFormat)
	}
	if o.LogLevel != "" {
		args = append(args, "--log-level="+o.LogLevel)
	}
	if len(o.Namespaces) > 0 {
		args = append(args, "--namespaces="+strings.Join(o.Namespaces, ","))
	}
	return append(args, o.Args...)
}
