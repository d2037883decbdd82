// Package testenv is the test framework every suite shares, from the
// envtest suites to the benchmark:
//
//   - a real kube-apiserver and etcd (controller-runtime's envtest) with
//     the PodSet CRD and the admission policies of config/ installed
//     (Start), and clients of a kubeconfig (NewClient, NewClientset);
//   - the operator built and run: BuildOperator; StartOperatorProcess,
//     the binary as a subprocess with a deployment's flags (end-to-end,
//     GitOps, real-node suites, the benchmark), on Process;
//     StartOperatorInProcess, its manager in the test's own process (the
//     envtest suites, the benchmark's in-process measurements);
//   - what the suites measure with: kube-apiserver's request counters
//     (ParseRequests), the operator's metrics (ParseMetrics,
//     GatherMetrics, Metrics' Sample and SumBy, Value), Percentile, timed
//     watches (WatchEvents, PodEvents);
//   - waiting (Waiter, Poll), namespaces, the kubelet's stand-in for
//     envtest, nodes, EndpointSlices and passes.
//
// The PodSets themselves are built with test/fixture.
//
// The binaries come from KUBEBUILDER_ASSETS, which `make test` sets to the
// control plane it builds under bin/; run `make envtest-assets` once to use
// plain `go test` afterwards. TEST_LOGS=1 shows the logs of the operators
// under test.
package testenv
