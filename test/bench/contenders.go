package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// job is one piece of identical work: K sets of n replicas in a namespace.
// rollout marks the set-up of the rollout scenario (maxUnavailable 100%,
// and a Deployment instead of bare ReplicaSets).
type job struct {
	ns      string
	sets    []string
	n       int32
	rollout bool
}

// contender is one way of getting the job done: every contender can bring
// K sets of N pods up from nothing. What else it can do it declares by
// implementing the small interfaces below, which a scenario type-asserts;
// a scenario runs the contenders that can do its step and leaves the others
// out.
type contender interface {
	// name is the contender's name in the log ("limit apply W=32").
	name() string
	// kinds is what the observer watches to see it converge.
	kinds() kinds
	// create is the timed trigger of 0 -> n (the limit does the whole job).
	create(ctx context.Context, j job) error
	// ready reports that every set runs n ready pods.
	ready(s *state, j job) bool
}

// controllerRunner is a contender with a controller to start for each
// session: start begins controlling the namespaces (the operator, the
// tutorial and kruise-manager start theirs; replicaset and statefulset
// point the controller CPU reading at the kube-controller-manager, which
// always runs), and the returned func stops it. The limits have none.
type controllerRunner interface {
	start(ctx context.Context, namespaces []string) (stop func() error, err error)
}

// preparer is a contender with untimed set-up before the clock starts.
type preparer interface {
	prepare(ctx context.Context, j job) error
}

// scaler is a contender that scales its sets: the timed trigger of n -> to.
type scaler interface {
	scale(ctx context.Context, j job, to int32) error
}

// roller is a contender that rolls its sets out to template revision 2 by
// replacing their pods (the rollout scenario).
type roller interface {
	// rollout is the timed trigger of the change to revision 2.
	rollout(ctx context.Context, j job) error
	// rolledOut reports that every set runs n ready pods of revision 2.
	rolledOut(s *state, j job) bool
}

// imageChanger is a contender of the in-place scenario.
type imageChanger interface {
	contender
	// changeImage is the timed trigger of the in-place scenario: the
	// template's image becomes newImage, and nothing else changes.
	changeImage(ctx context.Context, j job) error
}

// What each contender can do beyond creating its sets, checked by the
// compiler; the scenarios find it by type assertions. applyLimit and the
// gated limit also have what limitContender has, which they embed.
var (
	_ preparer         = (*limitContender)(nil)
	_ scaler           = (*limitContender)(nil)
	_ roller           = (*applyLimit)(nil)
	_ imageChanger     = (*applyLimit)(nil)
	_ preparer         = (*gatedLimitContender)(nil)
	_ imageChanger     = (*gatedLimitContender)(nil)
	_ controllerRunner = (*podSetContender)(nil)
	_ scaler           = (*podSetContender)(nil)
	_ roller           = (*podSetContender)(nil)
	_ imageChanger     = (*podSetContender)(nil)
	_ controllerRunner = (*replicaSetContender)(nil)
	_ scaler           = (*replicaSetContender)(nil)
	_ roller           = (*replicaSetContender)(nil)
	_ imageChanger     = (*replicaSetContender)(nil)
	_ controllerRunner = (*statefulSetContender)(nil)
	_ scaler           = (*statefulSetContender)(nil)
	_ roller           = (*statefulSetContender)(nil)
	_ imageChanger     = (*statefulSetContender)(nil)
	_ controllerRunner = (*kruiseContender)(nil)
	_ scaler           = (*kruiseContender)(nil)
	_ imageChanger     = (*kruiseContender)(nil)
	_ controllerRunner = (*tutorialContender)(nil)
	_ scaler           = (*tutorialContender)(nil)
)

// startContender starts x's controller, if it runs one.
func startContender(ctx context.Context, x contender, namespaces []string) (func() error, error) {
	if r, ok := x.(controllerRunner); ok {
		return r.start(ctx, namespaces)
	}
	return func() error { return nil }, nil
}

// prepareContender does x's untimed set-up, if it has any.
func prepareContender(ctx context.Context, x contender, j job) error {
	if p, ok := x.(preparer); ok {
		return p.prepare(ctx, j)
	}
	return nil
}

// podsReady: every set has exactly n live pods, all ready (of revision rev
// when rev is not empty), and no terminating ones when strict.
func podsReady(s *state, j job, rev string, strict bool) bool {
	by := countPods(s, j.ns, rev)
	for _, set := range j.sets {
		if x := by[set]; x.live != int(j.n) || x.ready != int(j.n) || strict && x.all != int(j.n) {
			return false
		}
	}
	return true
}

// podsRemaining: every set has exactly n pods, terminating ones counted
// until they are gone, and all of them live.
func podsRemaining(s *state, ns string, sets []string, n int32) bool {
	by := countPods(s, ns, "")
	for _, set := range sets {
		if by[set].all != int(n) || by[set].live != int(n) {
			return false
		}
	}
	return true
}

// podCount is a set's pods: all, the live (not terminating) ones, and the
// live ready ones.
type podCount struct{ all, live, ready int }

// countPods counts the pods of each set in ns; with rev not empty, only
// pods of that revision count as ready.
func countPods(s *state, ns, rev string) map[string]podCount {
	by := map[string]podCount{}
	for _, p := range s.pods {
		if p.ns != ns {
			continue
		}
		x := by[p.set]
		x.all++
		if !p.terminating {
			x.live++
			if p.ready && (rev == "" || p.rev == rev) {
				x.ready++
			}
		}
		by[p.set] = x
	}
	return by
}

// setsDone reports whether every set of j is in m and passes check at
// j.n pods (setState.done, complete or rolledOut).
func setsDone(m map[string]setState, j job, check func(setState, int32) bool) bool {
	for _, set := range j.sets {
		s, ok := m[j.ns+"/"+set]
		if !ok || !check(s, j.n) {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------- limit

// limitContender is the physical limit: a plain client-go loop that writes
// the operator's own pods (same names, labels, owner reference and hardened
// spec, same field manager) with w parallel workers, either as server-side
// applies (the operator's own request) or, with creates set, as plain
// creates. Its PodSets exist only to own the pods: nothing reconciles them.
// Only the apply loop (applyLimit) rolls out and updates in place.
type limitContender struct {
	b       *bench
	w       int
	creates bool
	mu      sync.Mutex
	owners  map[string]*podsetv1alpha1.PodSet
}

// name is "limit apply W=8", or, for the create loop, "limit create W=8".
func (l *limitContender) name() string {
	loop := "apply"
	if l.creates {
		loop = "create"
	}
	return "limit " + loop + " W=" + strconv.Itoa(l.w)
}
func (l *limitContender) kinds() kinds { return kindPods }

func (l *limitContender) prepare(ctx context.Context, j job) error { return l.own(ctx, j, "") }

// own creates the job's PodSets (with maxUnavailable mu) that own the pods.
func (l *limitContender) own(ctx context.Context, j job, mu string) error {
	owners, err := l.b.createPodSets(ctx, j, mu)
	if err == nil {
		l.keep(owners...)
	}
	return err
}

// keep remembers the owners as the API server stored them.
func (l *limitContender) keep(owners ...*podsetv1alpha1.PodSet) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owners == nil {
		l.owners = map[string]*podsetv1alpha1.PodSet{}
	}
	for _, ps := range owners {
		l.owners[ps.Namespace+"/"+ps.Name] = ps
	}
}

// retemplate changes the owners' template to tmpl(set), one request per
// set, as for the others.
func (l *limitContender) retemplate(ctx context.Context, j job, tmpl func(set string) corev1.PodTemplateSpec) error {
	for _, set := range j.sets {
		ps, err := patchPodSetTemplate(ctx, l.b.c.cl, l.owner(j.ns, set), tmpl(set))
		if err != nil {
			return err
		}
		l.keep(ps)
	}
	return nil
}

func (l *limitContender) owner(ns, set string) *podsetv1alpha1.PodSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owners[ns+"/"+set]
}

func (l *limitContender) create(ctx context.Context, j job) error {
	items := podItems(j, 0, false)
	write := l.apply
	if l.creates {
		write = l.createPod
	}
	return parallel(len(items), l.w, func(i int) error {
		_, err := write(ctx, l.owner(j.ns, items[i].set), items[i].ordinal)
		return err
	})
}

// apply applies the operator's pod for an ordinal and then, as the
// operator does for a pod it made, opens the pod's readiness gate through
// pods/status: a kubelet keeps a pod whose gate has no True condition out
// of Ready, and a create cannot set a status.
func (l *limitContender) apply(ctx context.Context, ps *podsetv1alpha1.PodSet, ordinal int) (*corev1.Pod, error) {
	pod, err := applyPod(ctx, l.b.c.cs.CoreV1().Pods(ps.Namespace), desiredPod(ps, ordinal))
	if err != nil {
		return pod, err
	}
	return pod, l.openGate(ctx, pod)
}

// applyPod sends ac as the operator sends a pod apply.
func applyPod(ctx context.Context, pods typedcorev1.PodInterface, ac *corev1ac.PodApplyConfiguration) (*corev1.Pod, error) {
	data, err := json.Marshal(ac)
	if err != nil {
		return nil, err
	}
	return pods.Patch(ctx, deref(ac.Name, ""), types.ApplyPatchType, data, controller.WriteOptions(true))
}

// createPod creates the operator's pod for an ordinal with a plain POST (the
// very pod apply would send, as a typed object, under the same field
// manager), then opens its readiness gate as apply does.
func (l *limitContender) createPod(ctx context.Context, ps *podsetv1alpha1.PodSet, ordinal int) (*corev1.Pod, error) {
	want := &corev1.Pod{}
	if err := viaJSON(desiredPod(ps, ordinal), want); err != nil {
		return nil, fmt.Errorf("converting pod %d of %s: %w", ordinal, ps.Name, err)
	}
	pod, err := l.b.c.cs.CoreV1().Pods(ps.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return pod, err
	}
	return pod, l.openGate(ctx, pod)
}

// openGate sets the pod's podset.dev/InPlaceUpdateReady condition True
// through pods/status, as the operator does (openGatePatch), when the pod
// has that gate.
func (l *limitContender) openGate(ctx context.Context, pod *corev1.Pod) error {
	if !slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool {
		return g.ConditionType == podsetv1alpha1.InPlaceUpdateReadyCondition
	}) {
		return nil
	}
	if err := openGatePatch(ctx, l.b.c.cs.CoreV1().Pods(pod.Namespace), pod.Name, pod.UID); err != nil {
		return fmt.Errorf("opening the readiness gate of pod %s: %w", pod.Name, err)
	}
	return nil
}

func (l *limitContender) ready(s *state, j job) bool { return podsReady(s, j, "", true) }

func (l *limitContender) scale(ctx context.Context, j job, to int32) error {
	items := podItems(j, to, true)
	return parallel(len(items), l.w, func(i int) error {
		return l.b.c.cs.CoreV1().Pods(j.ns).Delete(ctx, items[i].name(), metav1.DeleteOptions{})
	})
}

// applyLimit is the limit's apply loop, the one that also rolls out and
// updates in place.
type applyLimit struct{ *limitContender }

// rollout changes the owners' template (one request, as for the others),
// then replaces every pod: delete, wait until it is gone (its name is
// reused), apply the new one.
func (l *applyLimit) rollout(ctx context.Context, j job) error {
	if err := l.retemplate(ctx, j, revision2); err != nil {
		return err
	}
	r := &limitRollout{l: l, j: j, items: podItems(j, 0, true), uids: map[string]types.UID{}}
	err := parallel(len(r.items), l.w, func(i int) error {
		name := r.items[i].name()
		if err := l.b.c.cs.CoreV1().Pods(j.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		key := j.ns + "/" + name
		if err := l.b.obs.waitFor(ctx, "pod "+name+" gone", func(s *state) bool { return s.pods[key] == nil }); err != nil {
			return err
		}
		return r.apply(ctx, r.items[i])
	})
	if err != nil {
		return err
	}
	return r.reapplyDeleted(ctx)
}

// limitItem is a pod of the limit: its set and ordinal.
type limitItem struct {
	set     string
	ordinal int
}

func (it limitItem) name() string { return podName(it.set, it.ordinal) }

// podItems lists the job's pods of ordinals lo to n-1, ordinal by ordinal
// across the sets: the lowest ordinal first, or the highest when desc.
func podItems(j job, lo int32, desc bool) []limitItem {
	var items []limitItem
	for i := lo; i < j.n; i++ {
		o := i
		if desc {
			o = j.n - 1 - (i - lo)
		}
		for _, set := range j.sets {
			items = append(items, limitItem{set, int(o)})
		}
	}
	return items
}

// limitRollout is one rollout of the apply limit: its pods, and the UID
// each name was last applied as.
type limitRollout struct {
	l     *applyLimit
	j     job
	items []limitItem
	mu    sync.Mutex
	uids  map[string]types.UID
}

// apply applies the pod of it and remembers its UID.
func (r *limitRollout) apply(ctx context.Context, it limitItem) error {
	pod, err := r.l.apply(ctx, r.l.owner(r.j.ns, it.set), it.ordinal)
	if err == nil {
		r.mu.Lock()
		r.uids[pod.Name] = pod.UID
		r.mu.Unlock()
	}
	return err
}

// reapplyDeleted waits for the rollout, applying again the pods kwok
// deleted: kwok deletes a terminating pod by name, without a UID
// precondition, and sometimes twice: the second delete can hit the pod
// re-created under that name. A controller re-creates it; so does the
// limit.
func (r *limitRollout) reapplyDeleted(ctx context.Context) error {
	for {
		var missing []limitItem
		err := r.l.b.obs.waitFor(ctx, "the rollout", func(s *state) bool {
			missing = missing[:0]
			if podsReady(s, r.j, "2", true) {
				return true
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, it := range r.items {
				if name := it.name(); s.pods[r.j.ns+"/"+name] == nil && s.gone[r.uids[name]] {
					missing = append(missing, it)
				}
			}
			return len(missing) > 0
		})
		if err != nil || len(missing) == 0 {
			return err
		}
		logf("rollout, %s: re-applying %d pods that kwok deleted", r.l.name(), len(missing))
		for _, it := range missing {
			if err := r.apply(ctx, it); err != nil {
				return err
			}
		}
	}
}

func (l *applyLimit) rolledOut(s *state, j job) bool { return podsReady(s, j, "2", true) }

// changeImage changes the owners' template (one request, as for the
// others), then patches each pod's image where it runs: one write per pod,
// the least an in-place update can send.
func (l *applyLimit) changeImage(ctx context.Context, j job) error {
	if err := l.retemplate(ctx, j, imageTemplate); err != nil {
		return err
	}
	c := imageTemplate("").Spec.Containers[0]
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []map[string]string{{"name": c.Name, "image": c.Image}}}})
	if err != nil {
		return err
	}
	items := podItems(j, 0, true)
	return parallel(len(items), l.w, func(i int) error {
		_, err := l.b.c.cs.CoreV1().Pods(j.ns).Patch(ctx, items[i].name(), types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		return err
	})
}

// ---------------------------------------------------------------- tutorial

// tutorialContender runs the tutorial controller in this process.
type tutorialContender struct{ b *bench }

func (t *tutorialContender) name() string { return "tutorial" }
func (t *tutorialContender) kinds() kinds { return kindPods | kindPodSets }
func (t *tutorialContender) start(ctx context.Context, namespaces []string) (func() error, error) {
	return startTutorial(ctx, t.b.c, namespaces)
}
func (t *tutorialContender) create(ctx context.Context, j job) error {
	_, err := t.b.createPodSets(ctx, j, "")
	return err
}

// ready: the tutorial's status counts pending pods as available and never
// sees readiness (its event filter drops pod status updates), so the
// benchmark's own pod watch decides: n live pods per set, all ready.
func (t *tutorialContender) ready(s *state, j job) bool { return podsReady(s, j, "", false) }
func (t *tutorialContender) scale(ctx context.Context, j job, to int32) error {
	return scalePodSets(ctx, t.b.c.cl, j, to)
}

// ---------------------------------------------------------------- replicaset

// kcm is what the contenders of kube-controller-manager share: their
// controller always runs, and start points the controller CPU reading at
// it.
type kcm struct{ b *bench }

func (k kcm) start(context.Context, []string) (func() error, error) {
	k.b.c.ctrlPID.Store(k.b.c.controllerManager())
	return func() error { return nil }, nil
}

// replicaSetContender is kube-controller-manager's ReplicaSet controller
// (QPS limits lifted), and its Deployment controller for the rollout.
type replicaSetContender struct{ kcm }

func (r *replicaSetContender) name() string { return "replicaset" }
func (r *replicaSetContender) kinds() kinds { return kindPods | kindReplicaSets | kindDeployments }

func (r *replicaSetContender) create(ctx context.Context, j job) error {
	return parallel(len(j.sets), 8, func(i int) error {
		set := j.sets[i]
		tmpl := hardenedTemplate(template(set, 1))
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{setLabel: set}}
		meta := metav1.ObjectMeta{Namespace: j.ns, Name: set}
		var obj client.Object
		if j.rollout {
			obj = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
				Replicas: ptrTo(j.n), Selector: sel, Template: tmpl,
				Strategy: appsv1.DeploymentStrategy{
					Type: appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{
						MaxUnavailable: ptrTo(intstr.FromString("100%")),
						MaxSurge:       ptrTo(intstr.FromInt32(0)),
					},
				},
			}}
		} else {
			obj = &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: ptrTo(j.n), Selector: sel, Template: tmpl}}
		}
		return r.b.c.cl.Create(ctx, obj)
	})
}

func (r *replicaSetContender) ready(s *state, j job) bool {
	if j.rollout {
		return setsDone(s.deployments, j, setState.complete)
	}
	return setsDone(s.replicasets, j, setState.done)
}

func (r *replicaSetContender) scale(ctx context.Context, j job, to int32) error {
	return scaleSets(ctx, r.b.c.cl, j, to, &appsv1.ReplicaSet{})
}

func (r *replicaSetContender) rollout(ctx context.Context, j job) error {
	return patchTemplates(ctx, r.b.c.cl, j, &appsv1.Deployment{}, revision2)
}
func (r *replicaSetContender) rolledOut(s *state, j job) bool {
	return setsDone(s.deployments, j, setState.rolledOut)
}

// changeImage changes the Deployments' image: a rollout to a new
// ReplicaSet, whose pods replace the old ones.
func (r *replicaSetContender) changeImage(ctx context.Context, j job) error {
	return patchTemplates(ctx, r.b.c.cl, j, &appsv1.Deployment{}, imageTemplate)
}

// ---------------------------------------------------------------- statefulset

// statefulSetContender is kube-controller-manager's StatefulSet controller
// (QPS limits lifted), one StatefulSet per set: podManagementPolicy
// Parallel and a rolling update with maxUnavailable 100% (the
// MaxUnavailableStatefulSet feature, beta and on by default since
// Kubernetes 1.37), in every scenario, the in-place one included. It
// replaces each out-of-date pod under its name: delete, then create.
type statefulSetContender struct{ kcm }

func (t *statefulSetContender) name() string { return "statefulset" }
func (t *statefulSetContender) kinds() kinds { return kindPods | kindStatefulSets }

func (t *statefulSetContender) create(ctx context.Context, j job) error {
	return parallel(len(j.sets), 8, func(i int) error {
		set := j.sets[i]
		tmpl := hardenedTemplate(template(set, 1))
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: j.ns, Name: set}, Spec: appsv1.StatefulSetSpec{
			Replicas:            ptrTo(j.n),
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{setLabel: set}},
			Template:            tmpl,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptrTo(intstr.FromString("100%"))},
			},
		}}
		if err := t.b.c.cl.Create(ctx, sts); err != nil {
			return err
		}
		// The API server drops the field when the feature gate is off,
		// and the rollout would go one pod at a time.
		if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil {
			return fmt.Errorf("StatefulSet %s: the API server dropped updateStrategy.rollingUpdate.maxUnavailable: the MaxUnavailableStatefulSet feature gate is off", set)
		}
		return nil
	})
}

func (t *statefulSetContender) ready(s *state, j job) bool {
	return setsDone(s.sts, j, setState.complete)
}
func (t *statefulSetContender) scale(ctx context.Context, j job, to int32) error {
	return scaleSets(ctx, t.b.c.cl, j, to, &appsv1.StatefulSet{})
}

// rollout moves the StatefulSets' template to revision 2, the change every
// contender's rollout makes (a label and an environment variable): the pods
// must be recreated.
func (t *statefulSetContender) rollout(ctx context.Context, j job) error {
	return patchTemplates(ctx, t.b.c.cl, j, &appsv1.StatefulSet{}, revision2)
}
func (t *statefulSetContender) rolledOut(s *state, j job) bool {
	return setsDone(s.sts, j, setState.rolledOut)
}
func (t *statefulSetContender) changeImage(ctx context.Context, j job) error {
	return patchTemplates(ctx, t.b.c.cl, j, &appsv1.StatefulSet{}, imageTemplate)
}

// ---------------------------------------------------------------- podset

// podSetContender is podset-operator: as a subprocess of the shipped binary
// for the timed scenarios, with its metrics endpoint on 127.0.0.1, which
// the benchmark samples for its passes and heap (scale.go).
type podSetContender struct {
	b       *bench
	op      *operatorProcess
	samples *sampler
}

func (p *podSetContender) name() string { return "podset" }
func (p *podSetContender) kinds() kinds { return kindPods | kindPodSets }
func (p *podSetContender) start(ctx context.Context, namespaces []string) (func() error, error) {
	token, err := p.b.metricsToken(ctx)
	if err != nil {
		return nil, err
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(port)}
	if p.b.trace {
		args = append(args, "--log-level=debug")
	}
	p.op, err = startOperator(ctx, p.b.operatorBin, p.b.c.kubeconfig, logPath(p.b.logDir, "podset-operator"), namespaces, p.b.operatorFlags(args...)...)
	if err != nil {
		return nil, err
	}
	p.b.c.ctrlPID.Store(int32(p.op.Cmd.Process.Pid))
	p.samples = newOperatorMetrics(port, token).sample(5 * time.Second)
	p.b.ctrl = p.samples
	return p.stop, nil
}

// stop stops sampling and the operator; it may be called again.
func (p *podSetContender) stop() error {
	if p.samples != nil {
		p.samples.stop()
		p.b.ctrl, p.samples = nil, nil
	}
	if p.op == nil {
		return nil
	}
	err := p.op.stop()
	p.op = nil
	return err
}
func (p *podSetContender) create(ctx context.Context, j job) error {
	_, err := p.b.createPodSets(ctx, j, maxUnavailableOf(j))
	return err
}
func (p *podSetContender) ready(s *state, j job) bool { return setsDone(s.podsets, j, setState.done) }
func (p *podSetContender) scale(ctx context.Context, j job, to int32) error {
	return scalePodSets(ctx, p.b.c.cl, j, to)
}
func (p *podSetContender) rollout(ctx context.Context, j job) error {
	return p.retemplate(ctx, j, revision2)
}
func (p *podSetContender) changeImage(ctx context.Context, j job) error {
	return p.retemplate(ctx, j, imageTemplate)
}

// retemplate reads each PodSet and changes its template to tmpl(set).
func (p *podSetContender) retemplate(ctx context.Context, j job, tmpl func(set string) corev1.PodTemplateSpec) error {
	return parallel(len(j.sets), 8, func(i int) error {
		ps := &podsetv1alpha1.PodSet{}
		if err := p.b.c.cl.Get(ctx, client.ObjectKey{Namespace: j.ns, Name: j.sets[i]}, ps); err != nil {
			return err
		}
		_, err := patchPodSetTemplate(ctx, p.b.c.cl, ps, tmpl(ps.Name))
		return err
	})
}
func (p *podSetContender) rolledOut(s *state, j job) bool {
	return setsDone(s.podsets, j, setState.rolledOut)
}

// inProcessPodSet is the same operator built in this process (see
// startInProcess), for the measurements that need to look inside it.
type inProcessPodSet struct {
	podSetContender
	rec *recorder
}

func (p *inProcessPodSet) name() string { return "podset (in-process)" }
func (p *inProcessPodSet) start(ctx context.Context, namespaces []string) (func() error, error) {
	op, err := startInProcess(ctx, p.b.c, namespaces, p.rec.wrap)
	if err != nil {
		return nil, err
	}
	return func() error { _ = op.Stop(); return nil }, nil
}

// ---------------------------------------------------------------- helpers

// maxUnavailableOf is the maxUnavailable of the PodSets of a job: 100% for
// the rollout scenario, else the default.
func maxUnavailableOf(j job) string {
	if j.rollout {
		return "100%"
	}
	return ""
}

// createPodSets creates the job's PodSets, eight at a time, and returns
// them as the API server stored them.
func (b *bench) createPodSets(ctx context.Context, j job, maxUnavailable string) ([]*podsetv1alpha1.PodSet, error) {
	out := make([]*podsetv1alpha1.PodSet, len(j.sets))
	err := parallel(len(j.sets), 8, func(i int) error {
		ps := newPodSet(j.ns, j.sets[i], j.n, maxUnavailable, b.podSetPolicy)
		if err := b.c.cl.Create(ctx, ps); err != nil {
			return fmt.Errorf("creating PodSet %s: %w", ps.Name, err)
		}
		out[i] = ps
		return nil
	})
	return out, err
}

func scalePodSets(ctx context.Context, cl client.Client, j job, to int32) error {
	return scaleSets(ctx, cl, j, to, &podsetv1alpha1.PodSet{})
}

// scaleSets sets the replicas of each set's object of kind like, eight at a
// time, with a merge patch.
func scaleSets(ctx context.Context, cl client.Client, j job, to int32, like client.Object) error {
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":`+strconv.Itoa(int(to))+`}}`))
	return parallel(len(j.sets), 8, func(i int) error {
		return cl.Patch(ctx, setObject(like, j.ns, j.sets[i]), patch)
	})
}

// setObject is a reference to the object of kind like named set in ns.
func setObject(like client.Object, ns, set string) client.Object {
	obj := like.DeepCopyObject().(client.Object)
	obj.SetNamespace(ns)
	obj.SetName(set)
	return obj
}

// revision2 is the template of a set's revision 2, the change every
// contender's rollout makes.
func revision2(set string) corev1.PodTemplateSpec { return template(set, 2) }

// patchTemplates replaces the template of each set's workload object (a
// Deployment or StatefulSet, of kind like) with the hardened tmpl(set).
func patchTemplates(ctx context.Context, cl client.Client, j job, like client.Object, tmpl func(set string) corev1.PodTemplateSpec) error {
	return parallel(len(j.sets), 8, func(i int) error {
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": hardenedTemplate(tmpl(j.sets[i]))}})
		if err != nil {
			return err
		}
		return cl.Patch(ctx, setObject(like, j.ns, j.sets[i]), client.RawPatch(types.StrategicMergePatchType, patch))
	})
}

// patchPodSetTemplate replaces a PodSet's template and returns the PodSet
// as stored.
func patchPodSetTemplate(ctx context.Context, cl client.Client, ps *podsetv1alpha1.PodSet, tmpl corev1.PodTemplateSpec) (*podsetv1alpha1.PodSet, error) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
	if err != nil {
		return nil, err
	}
	out := ps.DeepCopy()
	if err := cl.Patch(ctx, out, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("changing the template of PodSet %s: %w", ps.Name, err)
	}
	return out, nil
}

// parallel calls fn for 0..n-1 with at most workers calls at a time and
// returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for range min(max(workers, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
