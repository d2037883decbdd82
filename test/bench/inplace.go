package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// The in-place rollout: one set of N ready pods with maxUnavailable 100%,
// then the template's image changes, and nothing else. The clock stops
// when every pod is Ready again and runs the new image: its spec names it
// and, where its status reports the container, so does the status. The
// operator (podUpdatePolicy InPlaceIfPossible) updates the pods where they
// run, behind its readiness gate, as OpenKruise's CloneSet does behind its
// own (the kruise contender, with KRUISE_DIR); Deployment and StatefulSet
// replace them; the limit patches each pod's image.

// inPlace is the in-place rollout, with every contender that changes an
// image (imageChanger) and the gated limit.
type inPlace struct{}

// inPlaceResult is what the in-place scenario measured.
type inPlaceResult struct {
	n   int32
	res *timedResult
}

func (inPlace) phase() string { return "inplace" }

// inPlaceContenders are the in-place scenario's contenders, in the order
// they run: the apply loops of the limit, the gated limit, then the others
// that change an image.
func (b *bench) inPlaceContenders() []imageChanger {
	var limits, others []imageChanger
	for _, x := range b.contenders() {
		switch x := x.(type) {
		case *applyLimit:
			limits = append(limits, x)
		case imageChanger:
			others = append(others, x)
		}
	}
	if b.runs("gated-limit") {
		limits = append(limits, newGatedLimit(b, slices.Max(b.size.workers)))
	}
	return append(limits, others...)
}

// run checks that the cluster can update a pod in place, then runs the
// scenario with every contender. Without that, the operator's and the
// limit's pods would never be seen running the new image: they are
// recorded as not run, and the run fails.
func (inPlace) run(ctx context.Context, b *bench) result {
	n := b.size.inPlace
	out := &inPlaceResult{n: n, res: &timedResult{id: fmt.Sprintf("in-place %d", n)}}
	var probe *string // what the cluster lacks for in-place updates ("" when nothing), once checked
	for _, x := range b.inPlaceContenders() {
		if ctx.Err() != nil {
			break
		}
		kind := contenderKind(x.name())
		if kind == "limit" || kind == "gated-limit" || kind == "podset" {
			if probe == nil {
				logf("== in-place: can kwok update a pod in place?")
				problem, err := b.kwokUpdatesInPlace(ctx)
				if err != nil {
					problem = err.Error()
				}
				probe = &problem
				if problem != "" {
					b.fail("in-place %d: the cluster cannot update a pod in place: %s (the kwok stages internal/localcluster gives kwok must act as a kubelet does for in-place updates)",
						n, problem)
				}
			}
			if *probe != "" {
				out.res.record(b, x.name(), &measurement{skipped: true, note: "not run: " + *probe})
				continue
			}
		}
		logf("== in-place %d, %s", n, x.name())
		b.updateImage(ctx, x, n, out.res)
	}
	return out
}

// updateImage sets up one set of n ready pods with maxUnavailable 100%
// and times the change of its image until every pod is Ready again on the
// new image.
func (b *bench) updateImage(ctx context.Context, x imageChanger, n int32, res *timedResult) {
	id := res.id
	err := b.session(ctx, "ip-"+slug(x.name()), x, x.kinds(), func(ns string) error {
		j := job{ns: ns, sets: setNames(1), n: n, rollout: true}
		steady := func(s *state) bool { return x.ready(s, j) && podsOnImage(s, j, baseImage) }
		if err := b.setUp(ctx, x, j, "the in-place rollout's starting point", steady); err != nil {
			return err
		}
		time.Sleep(settle)
		before, err := b.podUIDs(ctx, ns)
		if err != nil {
			return err
		}
		var start time.Time
		m := b.timed(ctx, 0, func(ctx context.Context) error { start = time.Now(); return x.changeImage(ctx, j) },
			func(s *state) bool { return podsOnImage(s, j, newImage) }, nil)
		m.pods = len(j.sets) * int(j.n)
		m.gateCloses = gateCloses(x, m)
		b.obs.read(func(s *state) { logf("%s, %s: %s", id, x.name(), imageTimeline(s, j, start)) })
		if m.err != nil {
			b.obs.read(func(s *state) { logf("%s, %s: %s", id, x.name(), imageProgress(s, j)) })
		} else if after, err := b.podUIDs(ctx, ns); err != nil {
			m.err = err
		} else {
			m.recreated = 0
			for uid := range after {
				if !before[uid] {
					m.recreated++
				}
			}
			logf("%s, %s: %d of %d pods recreated; API writes per pod: %s",
				id, x.name(), m.recreated, n, inPlaceWrites(x.name(), m))
		}
		res.record(b, x.name(), m)
		if !m.completed() {
			return nil
		}
		b.verifyPods(ctx, id, x, j, n)
		b.checkInPlace(id, x, m, int(n))
		return nil
	})
	if err != nil {
		b.fail("%s, %s: %v", id, x.name(), err)
	}
}

// checkInPlace checks what updating in place means for the operator and
// the limits: no pod created, deleted, bound or recreated, and exactly one
// write to each pod (the status subresource aside).
func (b *bench) checkInPlace(id string, x contender, m *measurement, n int) {
	kind := contenderKind(x.name())
	if kind != "podset" && kind != "limit" && kind != "gated-limit" {
		return
	}
	c := m.counts
	if c.podPosts != 0 || c.podDeletes != 0 || c.bindings != 0 || m.recreated != 0 {
		b.fail("%s, %s: pods were replaced, not updated in place: %d created, %d deleted, %d bound, %d of %d with a new UID",
			id, x.name(), c.podPosts, c.podDeletes, c.bindings, m.recreated, n)
	}
	if writes := c.podCreates - c.podPosts; writes != n {
		what := "want exactly one per pod"
		if kind != "podset" {
			what = "the request counts are polluted"
		}
		b.fail("%s, %s: %d pod writes (patch or apply) for %d pods: %s", id, x.name(), writes, n, what)
	}
}

// podsOnImage: every set has exactly n pods, none terminating, all Ready,
// whose spec runs image and whose status, where it reports the container,
// runs it too.
func podsOnImage(s *state, j job, image string) bool {
	by := map[string]int{}
	for _, p := range s.pods {
		if p.ns != j.ns {
			continue
		}
		if p.terminating || !p.ready || p.image != image || p.staleImage {
			return false
		}
		by[p.set]++
	}
	for _, set := range j.sets {
		if by[set] != int(j.n) {
			return false
		}
	}
	return true
}

// imageProgress describes how far an in-place rollout got.
func imageProgress(s *state, j job) string {
	var all, spec, status, ready int
	for _, p := range s.pods {
		if p.ns != j.ns {
			continue
		}
		all++
		if p.image == newImage && !p.terminating {
			spec++
			if !p.staleImage {
				status++
				if p.ready {
					ready++
				}
			}
		}
	}
	return fmt.Sprintf("%d pods (want %d): %d with the new image in their spec, %d of them not contradicted by their status, %d of those Ready",
		all, len(j.sets)*int(j.n), spec, status, ready)
}

// imageTimeline says when, after start, the last pod left Ready, had the
// new image in its spec, ran it as far as its status says, and was Ready:
// where an in-place rollout spends its time.
func imageTimeline(s *state, j job, start time.Time) string {
	var unready, image, runs, ready time.Time
	latest := func(t *time.Time, at time.Time) {
		if at.After(start) && at.After(*t) {
			*t = at
		}
	}
	for _, p := range s.pods {
		if p.ns == j.ns {
			latest(&unready, p.unreadyAt)
			latest(&image, p.imageAt)
			latest(&runs, p.runsAt)
			latest(&ready, p.readyAt)
		}
	}
	since := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return "+" + fmtDur(t.Sub(start))
	}
	return fmt.Sprintf("the last pod left Ready at %s, had the new image in its spec at %s, in its status at %s, was Ready at %s",
		since(unready), since(image), since(runs), since(ready))
}

// podUIDs lists the UIDs of the live pods of a namespace on the API server.
func (b *bench) podUIDs(ctx context.Context, ns string) (map[types.UID]bool, error) {
	list, err := b.c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	uids := map[types.UID]bool{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			uids[p.UID] = true
		}
	}
	return uids, nil
}

// probeGate is the readiness gate of the in-place probe's pod.
const probeGate = "bench.podset.dev/probe"

// kwokUpdatesInPlace checks on one pod that the cluster's kwok stages do
// for an in-place update what a kubelet does, and what the operator's
// updates wait for: a pod leaves Ready while a readiness gate condition is
// False, its status reports a new image once its spec changes, and it is
// Ready again once the gate is True. It returns what they do not do.
func (b *bench) kwokUpdatesInPlace(ctx context.Context) (string, error) {
	ns, err := b.c.namespace(ctx, "ip-probe")
	if err != nil {
		return "", err
	}
	obs, err := newObserver(ctx, b.c, []string{ns}, kindPods)
	if err != nil {
		return "", err
	}
	defer func() {
		err := b.clear(context.WithoutCancel(ctx), obs, ns)
		obs.stop()
		if err != nil {
			b.fail("in-place probe: cleaning up: %v", err)
		}
	}()

	tmpl := template("probe", 1)
	spec := hardenedSpec(tmpl.Spec)
	spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: probeGate}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, Labels: tmpl.Labels}, Spec: spec}
	pods := b.c.cs.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{FieldManager: benchFieldManager}); err != nil {
		return "", fmt.Errorf("in-place probe: %w", err)
	}
	gate := func(status corev1.ConditionStatus) error {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: probeGate, Status: status, LastTransitionTime: metav1.Now(),
		}}}})
		if err == nil {
			_, err = pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: benchFieldManager}, "status")
		}
		return err
	}
	key := ns + "/" + pod.Name
	wait := func(cond func(p *podState) bool) bool {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return obs.waitFor(wctx, "the probe", func(s *state) bool { p := s.pods[key]; return p != nil && cond(p) }) == nil
	}
	steps := []struct {
		act     func() error
		done    func(p *podState) bool
		problem string
	}{
		{func() error { return gate(corev1.ConditionTrue) }, func(p *podState) bool { return p.ready },
			"a new pod whose readiness gate is True does not become Ready"},
		{func() error { return gate(corev1.ConditionFalse) }, func(p *podState) bool { return !p.ready },
			"a pod stays Ready while its readiness gate condition is False"},
		{func() error {
			_, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType,
				[]byte(`{"spec":{"containers":[{"name":"`+spec.Containers[0].Name+`","image":"`+newImage+`"}]}}`),
				metav1.PatchOptions{FieldManager: benchFieldManager})
			return err
		}, func(p *podState) bool { return p.image == newImage && !p.staleImage },
			"a pod's status keeps the old image after its spec's image changed"},
		{func() error { return gate(corev1.ConditionTrue) }, func(p *podState) bool { return p.ready && p.image == newImage && !p.staleImage },
			"a pod whose readiness gate is True again does not become Ready again"},
	}
	for _, step := range steps {
		if err := step.act(); err != nil {
			return "", fmt.Errorf("in-place probe: %w", err)
		}
		if !wait(step.done) {
			return step.problem + " (within 10 s)", nil
		}
	}
	return "", nil
}

// gateCloses is how many of the pods/status PATCHes of an in-place
// rollout were the contender's own gate closes rather than kwok's: the
// operator's own count of its gate writes (podset_operator_pod_writes_total)
// less its gate opens (the pods/status APPLYs: nobody else applies a pod's
// status), the gated limit's count of its patches, none for the limit and
// the built-in controllers; -1 when not known (kruise-manager writes its
// own readiness gate's condition with the same verb kwok uses).
func gateCloses(x contender, m *measurement) int {
	switch x := x.(type) {
	case *gatedLimitContender:
		return int(x.closes.Load())
	case *podSetContender:
		opens := m.requests.Count(func(k requestKey) bool { return isPod(k, "status") && k.Verb == "APPLY" })
		if m.gateWrites < opens {
			return -1
		}
		return m.gateWrites - opens
	case *kruiseContender:
		return -1
	}
	return 0
}

// inPlaceWritesSource says where inPlaceWrites' numbers come from.
const inPlaceWritesSource = "API writes per in-place pod, by client: kube-apiserver's apiserver_request_total (no client label) " +
	"by verb and subresource in the measured window, each given to the one client that sends it in that run (pod writes: the controller; " +
	"pods/binding: the scheduler); the pods/status PATCHes split between the controller's gate closes (the operator's own " +
	"podset_operator_pod_writes_total, the gated limit's own count) and kwok's stages (the kubelet stand-in)"

// inPlaceWrites is what an in-place rollout cost the API server in writes
// per pod, by client: the contender's controller, kwok's stages (the
// kubelet) and the scheduler. Every code is counted: a conflict costs the
// API server too.
func inPlaceWrites(name string, m *measurement) string {
	if m == nil || m.pods <= 0 || m.requests == nil {
		return "—"
	}
	per := func(match func(k requestKey) bool) float64 {
		return float64(m.requests.Count(match)) / float64(m.pods)
	}
	verb := func(sub string, verbs ...string) float64 {
		return per(func(k requestKey) bool { return isPod(k, sub) && slices.Contains(verbs, k.Verb) })
	}
	var ctrl, kubelet []string
	add := func(to *[]string, v float64, what string, always bool) {
		if v > 0 || always {
			*to = append(*to, fmt.Sprintf("%s %.2f", what, v))
		}
	}
	kind := contenderKind(name)
	inPlace := kind == "podset" || kind == "gated-limit"
	add(&ctrl, verb("", "POST"), "pods POST (create)", false)
	add(&ctrl, verb("", "DELETE"), "pods DELETE", false)
	add(&ctrl, verb("", "APPLY"), "pods APPLY (the image)", inPlace)
	add(&ctrl, verb("", "PATCH"), "pods PATCH (the image)", kind == "limit")
	add(&ctrl, verb("", "PUT"), "pods PUT", false)
	add(&ctrl, per(func(k requestKey) bool { return isPod(k, "resize") && testenv.IsWrite(k.Verb) }), "pods/resize", inPlace)
	patches := verb("status", "PATCH", "PUT")
	closes := 0.0
	switch {
	case m.gateCloses < 0:
		add(&kubelet, patches, "pods/status PATCH (kwok's and the controller's gate, not told apart)", true)
	default:
		closes = float64(m.gateCloses) / float64(m.pods)
		add(&ctrl, closes, "pods/status PATCH (gate close)", inPlace)
		add(&kubelet, patches-closes, "pods/status PATCH", true)
	}
	add(&ctrl, verb("status", "APPLY"), "pods/status APPLY (gate open)", inPlace)
	who := map[string]string{
		"podset": "operator", "limit": "limit", "gated-limit": "gated limit",
		"replicaset": "kube-controller-manager (ReplicaSet)", "statefulset": "kube-controller-manager (StatefulSet)",
		"kruise": "kruise-manager",
	}[kind]
	if len(ctrl) == 0 {
		ctrl = []string{"none"}
	}
	s := fmt.Sprintf("%s: %s; kwok (kubelet): %s", who, strings.Join(ctrl, ", "), strings.Join(kubelet, ", "))
	if b := per(func(k requestKey) bool { return isPod(k, "binding") && testenv.IsWrite(k.Verb) }); b > 0 {
		s += fmt.Sprintf("; scheduler: pods/binding %.2f", b)
	}
	return s
}

// inPlaceRows are the rows of the in-place scenario: the operator against
// the limit, the gated limit, Deployment and StatefulSet, what updating in
// place means for its requests, and each contender's API writes per pod.
// On kwok a pod's creation is free (no image, no container, no sandbox),
// so the Deployment's recreation is no target there: the operator's
// kube-apiserver CPU per pod is measured against the gated limit's, the
// same writes and waits sent by a plain loop.
func (ir *inPlaceResult) rows(b *bench) []row {
	res := ir.res
	title := fmt.Sprintf("in-place rollout of %d (image only, maxUnavailable 100%%)", ir.n)
	lim, gl, ps, dep, sts, kr := res.limit, res.gatedLimit, res.podset, res.replicaset, res.statefulset, res.kruise
	// Each contender's kind and its name in the table.
	named := []struct {
		kind, label string
		m           *measurement
	}{
		{"limit", "limit", lim}, {"gated-limit", "gated limit", gl}, {"podset", "podset", ps},
		{"replicaset", "replicaset (Deployment)", dep}, {"statefulset", "statefulset (Parallel)", sts}, {"kruise", "kruise (CloneSet, in place)", kr},
	}
	var rows []row
	if lim != nil {
		rows = append(rows, b.limitRow(title, res))
	}
	if gl != nil {
		r := measuredRow(title, newGatedLimit(b, slices.Max(b.size.workers)).label(), gl)
		r.check = "reference for the API server's CPU per pod; " + ratioOnly("podset / gated limit", ps, gl)
		rows = append(rows, r)
	}
	if ps != nil {
		// The limit neither drains nor waits for a kubelet: the operator's
		// time is judged against the gated limit, which sends the same
		// writes with the same waits.
		r := measuredRow(title, "podset", ps)
		if gl != nil {
			r.check, r.target, r.result = ratioCheck("podset / gated limit", ps, gl, 1.5, false)
			if lim != nil {
				r.check += "; " + ratioOnly("podset / limit", ps, lim) + " (the limit neither drains nor waits for the kubelet)"
			}
		} else {
			r.check = ratioOnly("podset / limit", ps, lim)
		}
		rows = append(rows, r)
	}
	if dep != nil {
		// No target: on kwok a pod's creation costs nothing, so the
		// Deployment's recreation is faster than an update in place can
		// be (see the limit's ratio).
		r := measuredRow(title, "replicaset (Deployment)", dep)
		r.check = ratioOnly("podset / deployment", ps, dep) + " (no target on kwok, where a pod's creation is free"
		if lim != nil && !lim.skipped {
			r.check += "; " + ratioOnly("limit / deployment", lim, dep)
		}
		r.check += ")"
		rows = append(rows, r)
	}
	for _, x := range named[4:] { // statefulset and kruise
		if x.m != nil {
			r := measuredRow(title, x.label, x.m)
			r.check = ratioOnly("podset / "+x.kind, ps, x.m)
			rows = append(rows, r)
		}
	}
	if ps != nil && gl != nil {
		rows = append(rows, apiCPURow(title, ps, gl))
	}
	if ps != nil && ps.err == nil && !ps.skipped {
		n, c := int(ir.n), ps.counts
		writes := c.podCreates - c.podPosts
		r := row{scenario: title, contender: "podset"}
		r.check = fmt.Sprintf("pod writes %d for N = %d pods; %d created, %d deleted, %d bound, %d recreated (new UID)",
			writes, n, c.podPosts, c.podDeletes, c.bindings, ps.recreated)
		r.target = "= N, none replaced"
		r.result = metStr(writes == n && c.podPosts == 0 && c.podDeletes == 0 && c.bindings == 0 && ps.recreated == 0)
		rows = append(rows, r)
	}
	first := true
	for _, x := range named {
		if x.m == nil || x.m.err != nil || x.m.skipped {
			continue
		}
		if first {
			rows = append(rows, row{scenario: title, contender: "—", check: inPlaceWritesSource + ":", target: "—", result: "—"})
			first = false
		}
		rows = append(rows, row{scenario: title, contender: x.label, check: inPlaceWrites(x.kind, x.m), target: "—", result: "—"})
	}
	return rows
}

// apiCPURow compares the operator's kube-apiserver CPU per in-place pod
// with the gated limit's.
func apiCPURow(title string, ps, gl *measurement) row {
	r := row{scenario: title, contender: "podset", target: "≤ 1.2", result: "missed"}
	per := func(m *measurement) (time.Duration, bool) {
		if m == nil || m.skipped || m.err != nil || m.cutoff || !m.cpu.ok || m.pods <= 0 {
			return 0, false
		}
		return m.cpu.api / time.Duration(m.pods), true
	}
	a, okA := per(ps)
	g, okG := per(gl)
	if !okA || !okG || g <= 0 {
		r.check = "kube-apiserver CPU per in-place pod: podset / gated limit = —"
		if okA && okG {
			r.check += " (the gated limit's is below the clock tick: too few pods)"
		}
		return r
	}
	ratio := a.Seconds() / g.Seconds()
	r.check = fmt.Sprintf("kube-apiserver CPU per in-place pod: podset %.2f ms, gated limit %.2f ms (%.2f s and %.2f s per 1000 pods): podset / gated limit = %.2f",
		a.Seconds()*1000, g.Seconds()*1000, a.Seconds()*1000, g.Seconds()*1000, ratio)
	r.result = metStr(ratio <= 1.2)
	return r
}
