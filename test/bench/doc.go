// Command bench measures podset-operator side by side with other ways of
// running the same pods, on one local kwok cluster, and prints one
// markdown table: each contender's time, API requests and CPU, the ratios
// to the operator and the targets. docs/benchmarks.md explains every
// number and keeps the latest results.
//
// # Running it
//
//	make bench         # -size full, with OpenKruise (KRUISE_DIR)
//	make bench-scale   # -only scale -scale $(SCALE)
//	make test-e2e      # ends with -size tiny: a correctness check
//	go run ./test/bench [-size tiny|full] [-out file] [-keep-cluster] [flags]
//
// `go run ./test/bench -h` lists the flags; -only, -contenders, -conv,
// -operator-flags, -trace, -profile and -podset-policy narrow or vary a run
// while working on the benchmark or the operator. main turns them into one
// config (main.go); nothing else reads a flag.
//
// The cluster is "podset-bench" (cluster.go starts it with internal/localcluster,
// with the client QPS limits of kube-controller-manager and kube-scheduler
// lifted): real kube-apiserver, etcd, kube-controller-manager and
// kube-scheduler, and kwok nodes on which pods become Running and Ready
// without images. CONTROLPLANE and KWOK_DIR name the binaries' folders
// (default: the Makefile's folders under bin/). A run reuses the cluster if
// it exists and leaves it running; it deletes a cluster it created unless
// -keep-cluster is set. A lease in the cluster lets one run at a time use
// it (lock.go). Progress goes to stderr, the controllers' logs and the
// plots to bin/bench/logs/<run>, the table to stdout (and to -out).
//
// The exit status is 1 when a contender does not converge or a correctness
// property breaks (pod counts, pod names, the limit's pods equal to the
// operator's, exactly N pod writes for N new pods and none in a converged
// pass, an in-place update that replaced a pod), never because of a
// timing: a missed target is a row of the table, not a failure.
//
// # How it is built
//
// A contender (the interface in contenders.go) is one way of
// getting K sets of N pods up: it has a name, the kinds of objects the
// observer watches for it, a timed create and a ready condition on what
// the observer saw. Whatever else it can do it declares by implementing
// small interfaces: controllerRunner (a controller to start and stop for
// each session), preparer (untimed set-up), scaler, roller (a template
// rollout that replaces pods) and imageChanger (the in-place scenario). A
// scenario type-asserts them and runs the contenders that can do its step.
// The contenders: the limit (plain client-go loops writing the operator's
// own pods, podset.DesiredPod; applyLimit is its apply loop, the one that
// rolls out and updates in place), the gated limit (gated.go: the
// operator's in-place writes and waits, from a plain loop), podset (the
// operator as a subprocess; inProcessPodSet builds it in this process), the
// ReplicaSet and Deployment controllers, the StatefulSet controller,
// OpenKruise's CloneSet (kruise.go, with KRUISE_DIR) and the tutorial's
// controller (tutorial.go).
//
// A scenario (main.go's interface) runs its contenders, each in a fresh
// namespace through bench.session, and returns a result that renders its
// own rows of the table (table.go has the shared row helpers). bench.timed
// measures one step: the time from the trigger to the condition, seen on
// a watch (observe.go), never by polling; the requests from kube-apiserver's
// apiserver_request_total before and after (cluster.go); the CPU of
// kube-apiserver, etcd and the contender's controller (cpu.go). The
// scenarios, in the order config.scenarios lists them, one file each:
// convergence.go (K x N from zero to ready, then a scale-down), rollout.go,
// inplace.go, reaction.go (a converged pass and the reaction time),
// memory.go and scale.go (-only scale). sizes (scenarios.go) gives their
// dimensions for -size full and tiny.
//
// # Adding a contender
//
// Write a type with name, kinds, create and ready, and the capability
// methods it supports (scale, rollout and rolledOut, changeImage, start,
// prepare); append it in bench.contenders (main.go), and give its kind a
// field in timedResult and its place in timedResult.slots (scenarios.go)
// and, if it needs one, a row in timedRows or the scenario's rows
// (table.go, inplace.go).
//
// # Adding a scenario
//
// Write one file with a type that has phase (its -only name) and run, and
// a result type with rows; run uses bench.session, bench.setUp and
// bench.timed, and records each measurement in a timedResult or its own
// result. Append it in config.scenarios (main.go).
package main
