package testenv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOperatorProcessOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		opts      OperatorProcessOptions
		wantArgs  []string // with the probe address as PROBE
		wantReady string   // ReadyURL with PROBE, or ReadyLine
		wantErr   bool
	}{
		"real-node: ready once started, everything off": {
			opts: OperatorProcessOptions{Kubeconfig: "k", LogFormat: "console", LogLevel: "debug"},
			wantArgs: []string{"--kubeconfig=k", "--leader-elect=false", "--metrics-bind-address=0",
				"--health-probe-bind-address=0", "--log-format=console", "--log-level=debug"},
		},
		"e2e: leader election, probe, extra args last": {
			opts: OperatorProcessOptions{
				Kubeconfig: "k", LeaderElection: true, LeaderElectionNamespace: "podset-system",
				MetricsAddress: "127.0.0.1:0", LogFormat: "console", Ready: ReadyOnProbe,
				Args: []string{"--metrics-bind-address", "127.0.0.1:8443"},
			},
			wantArgs: []string{"--kubeconfig=k", "--leader-elect=true", "--leader-election-namespace=podset-system",
				"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=PROBE", "--log-format=console",
				"--metrics-bind-address", "127.0.0.1:8443"},
			wantReady: "http://PROBE/readyz",
		},
		"benchmark: namespaces, ready on its workers": {
			opts: OperatorProcessOptions{Kubeconfig: "k", LogFormat: "json", Namespaces: []string{"a", "b"}, Ready: ReadyOnWorkers},
			wantArgs: []string{"--kubeconfig=k", "--leader-elect=false", "--metrics-bind-address=0",
				"--health-probe-bind-address=0", "--log-format=json", "--namespaces=a,b"},
			wantReady: `"Starting workers"`,
		},
		"the workers' line is only read in the JSON log": {
			opts:    OperatorProcessOptions{Kubeconfig: "k", LogFormat: "console", Ready: ReadyOnWorkers},
			wantErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			po, err := tc.opts.processOptions()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("processOptions() = %v, want an error", po.Args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			probe := "0"
			if u, ok := strings.CutPrefix(po.ReadyURL, "http://"); ok {
				probe = strings.TrimSuffix(u, "/readyz")
			}
			unprobed := func(s string) string {
				if probe == "0" {
					return s
				}
				return strings.ReplaceAll(s, probe, "PROBE")
			}
			var args []string
			for _, a := range po.Args {
				args = append(args, unprobed(a))
			}
			if diff := cmp.Diff(tc.wantArgs, args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReady, unprobed(po.ReadyURL+po.ReadyLine)); diff != "" {
				t.Errorf("readiness (-want +got):\n%s", diff)
			}
		})
	}
}
