//go:build e2e

// Package e2e is the end-to-end suite: it installs the operator the way a
// user does and runs the operator's binary against a real cluster with no
// more permissions than the shipped RBAC grants.
//
// The cluster is a local kwok cluster (internal/localcluster): real
// kube-apiserver (with PodSecurity admission), etcd, kube-controller-manager
// (garbage collector, Deployment controller) and kube-scheduler, and fake
// nodes on which pods of any image are scheduled and become Running and
// Ready without pulling an image.
//
// Every file carries the build constraint e2e, so `go test ./...` skips the
// suite. `make test-e2e` runs it with the binaries it needs; to run it
// by hand from the repository root, once `make test-e2e` has built them:
//
//	eval "$(make -s tool-env)"
//	go test -tags e2e ./test/e2e/ -count=1 -v
//
// TestMain builds the operator with the Dockerfile's build command (read
// from the Dockerfile, with a test VERSION) and checks that the result is a
// static binary reporting that version, deletes any cluster left over
// by an interrupted run, starts the cluster "podset-e2e" with two nodes, runs
// the tests and deletes the cluster again, whatever the outcome. It never
// touches the cluster "podset" that `make run` uses.
//
// TestInstallWithKustomize applies `kustomize build config/default` with
// `kubectl apply --server-side`; TestOperatorUnderItsShippedRBAC then scales
// the installed Deployment to zero (in kwok its pod runs no code) and runs
// the freshly built binary as a subprocess that impersonates the shipped
// service account, so every request it makes is authorized by config/rbac
// alone.
//
// The Helm chart is checked with the helm binary of HELM: TestChartLint
// runs `helm lint --strict`, TestChartRenders* compare `helm template` with
// `kustomize build` object by object, and TestHelmInstallUpgradeUninstall
// installs, upgrades and uninstalls the chart on a second cluster,
// "<cluster>-helm". TestMetricsServedWithAMountedCertificate scrapes the
// operator's metrics over a certificate of a CA of its own, verified.
//
// TestKwokKubeletStages checks the cluster itself, with a raw pod and no
// operator: kwok's fake pods (the stages of hack/kwok/stages) honour a
// readiness gate, restart a container on a new image and carry out a
// resize through pods/resize, as the operator's in-place updates expect of
// a kubelet.
package e2e
