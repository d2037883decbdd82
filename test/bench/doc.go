// Command bench is `make bench`: it measures podset-operator side by side
// with four other ways of running the same pods, on one local kwok cluster,
// and prints one markdown table of the results, the ratios and the targets
// of DESIGN.md section 6 (docs/benchmarks.md explains every number).
//
//	go run ./test/bench [-size tiny|full] [-out file] [-keep-cluster]
//
// The cluster is "podset-bench" (hack/local-cluster.sh, with the client QPS
// limits of kube-controller-manager and kube-scheduler lifted): real
// kube-apiserver, etcd, kube-controller-manager and kube-scheduler, and kwok
// nodes on which pods become Running and Ready without images. The run
// reuses the cluster if it exists and leaves it running; it deletes a
// cluster it created unless -keep-cluster is set. CONTROLPLANE and KWOK_DIR
// name the binaries' folders (default: the Makefile's folders under bin/).
// It never touches any other cluster.
//
// The contenders, each run in turn in fresh namespaces with everything
// deleted (and the pods gone) between runs:
//
//   - limit: plain client-go loops that write the operator's own pods
//     (same names, labels, owner reference, hardened spec and field manager:
//     controller.DesiredPod builds them, and the run checks that both loops'
//     pods equal the operator's), opening each pod's readiness gate through
//     pods/status as the operator does, with W = 8, 32 and 128 workers: one
//     loop server-side applies the pods, the other creates them with a plain
//     POST. The best loop and W are reported, and each loop's best is in
//     the log and the Check column. The rollout and in-place rollout run
//     the apply loop only.
//   - gated-limit (in-place rollout only; gated.go): a plain client-go
//     loop that sends, for each pod, the operator's writes of an update in
//     place with the operator's waits: the gate-closing status patch, the
//     kubelet's own not-Ready, spec.drainSeconds, the apply of the new
//     template, the containers' restart, the gate-opening status apply;
//     with the largest W. On kwok, where creating a pod is free, the
//     operator's kube-apiserver CPU per in-place pod is measured against
//     it, not its time against the Deployment's.
//   - podset: the operator, built with `CGO_ENABLED=0 go build -trimpath`
//     into bin/bench/podset-operator and run as a subprocess with the
//     deployment's flags (--leader-elect=false --metrics-bind-address=0
//     --health-probe-bind-address=0 --log-format json --namespaces <ns>).
//     The converged-pass, reaction-time and memory scenarios instead build
//     its manager in this process exactly as main.go does, to count its
//     passes, timestamp its requests and weigh its heap.
//   - replicaset: kube-controller-manager's ReplicaSet controller (its
//     Deployment controller for the rollout and the in-place rollout).
//   - statefulset: kube-controller-manager's StatefulSet controller
//     (podManagementPolicy Parallel, rollingUpdate.maxUnavailable 100%), one
//     StatefulSet per set, in every convergence scenario, the scale-down,
//     the rollout and the in-place rollout.
//   - tutorial: the classic tutorial's controller (tutorial.go), on PodSet
//     objects in its own namespaces, in this process.
//
// The scenarios (full size; -size tiny shrinks each to a few pods and has no
// 1000 x 1): 1 x 1000, 10 x 100, 100 x 10 and 1000 x 1 replicas from zero
// to ready; scale 1000 -> 100; a template rollout of 100 pods; an in-place
// rollout of 1000 pods (inplace.go:
// only the image changes; done when every pod is Ready and runs the new
// image in its spec and, where reported, its status; the limit there patches
// each pod's image; the table gives each contender's API writes per pod
// by client: controller, kwok's stages, scheduler); a converged pass; the reaction time from a spec change
// to the first pod write; the operator's heap per managed pod.
// Convergence is seen on watches, never by polling. Requests are counted
// from kube-apiserver's apiserver_request_total before and after each run,
// and the CPU time of the cluster's kube-apiserver and etcd processes
// (/proc/<pid>/stat, cpu.go) is read around each run's measured window.
//
// Two waits are bounded in the full size, and a run stopped at its bound
// is reported as cut off (a lower bound on the time), not as a failure:
// the tutorial stops once it is 15 times slower than the operator (one
// status conflict costs it up to the default rate limiter's 1000 s), and
// the rollout stops after a minute (the pods' grace period of 0 keeps
// kwok's by-name deletes, which can kill pods re-created under the same
// name over and over, out of it: docs/benchmarks.md).
//
// -only, -contenders, -conv and -operator-flags narrow or vary a run while
// working on the benchmark or the operator; `make bench` uses none of them.
//
// Progress goes to stderr, the table to stdout (and to -out). The exit
// status is 1 when a contender does not converge or a correctness property
// breaks (pod counts, pod names, the limit's pods equal to the operator's,
// exactly N pod writes for N new pods and none in a converged pass), never
// because of a timing: `make test` runs the tiny size. The in-place rollout
// also fails when the operator or a limit replaces a pod (a POST, DELETE
// or binding, or a pod UID that changed) or sends other than one pod write
// per pod, and when the cluster's kwok stages cannot update a pod in place
// (checked first on one pod; the operator and the limit are then not run).
package main
