package podset

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// Bits of FuzzDesiredPod's flags argument: what the template says.
const (
	fuzzInitContainer = 1 << iota // an init container with the same settings
	fuzzReadOnlyFalse             // readOnlyRootFilesystem: false
	fuzzReadOnlyTrue              // readOnlyRootFilesystem: true
	fuzzLocalhost                 // pod seccompProfile Localhost
	fuzzNoPodSC                   // no pod securityContext at all
	fuzzAutomountTrue             // automountServiceAccountToken: true
	fuzzDropNetRaw                // capabilities.drop: [NET_RAW]
	fuzzDropAll                   // capabilities.drop also has ALL
)

// fuzzLabels parses "k=v;k=v" into labels.
func fuzzLabels(s string) map[string]string {
	if s == "" {
		return nil
	}
	labels := map[string]string{}
	for kv := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		labels[k] = v
	}
	return labels
}

func FuzzDesiredPod(f *testing.F) {
	f.Add("web", uint16(3), uint16(2), "busybox:1.36", "tier=web", uint8(0))
	f.Add("a", uint16(1), uint16(0), "nginx", "", uint8(fuzzInitContainer|fuzzReadOnlyFalse|fuzzLocalhost))
	f.Add("web-1", uint16(10000), uint16(9999), "img@sha256:00", "podset.dev/name=x;podset.dev/ordinal=9;a=", uint8(0xff))
	f.Add("x", uint16(12), uint16(10), "", "=;team=a", uint8(fuzzNoPodSC|fuzzAutomountTrue|fuzzDropNetRaw))

	f.Fuzz(func(t *testing.T, name string, replicasIn, ordinalIn uint16, image, labelSpec string, flags uint8) {
		for _, s := range []string{name, image, labelSpec} {
			if !utf8.ValidString(s) {
				t.Skip("the API only holds valid UTF-8")
			}
		}
		replicasN := max(1, int(replicasIn)%(podsetv1alpha1.MaxReplicas+1))
		ordinal := int(ordinalIn) % replicasN
		ps, sc, drop := fuzzDesiredPodSet(name, replicasN, image, labelSpec, flags)
		before := ps.DeepCopy()
		hash := TemplateHash(ps)

		pod, err := PodFromTemplate(ps, &ps.Spec.Template, ordinal, hash)
		if err != nil {
			t.Fatalf("desiredPod() error = %v", err)
		}

		// The template is not mutated, and the hash does not move.
		if diff := cmp.Diff(before, ps); diff != "" {
			t.Fatalf("desiredPod() changed the PodSet (-before +after):\n%s", diff)
		}
		if got := TemplateHash(ps); got != hash {
			t.Fatalf("templateHash() = %q, then %q", hash, got)
		}
		checkDesiredIdentity(t, ps, pod, ordinal, hash)
		checkDesiredHardening(t, ps, pod, flags)
		for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			checkContainerHardening(t, c, image, sc, drop)
		}

		// The pod, once stored, is converged: no pass repairs it.
		stored := storedPod(t, ps, ordinal, hash)
		if drifted(ps, &ps.Spec.Template, &stored, ordinal, hash) {
			t.Errorf("drifted() = true for the pod desiredPod built")
		}
	})
}

// fuzzDesiredPodSet is FuzzDesiredPod's PodSet: its containers' security
// context sc (nil: none) and the capabilities it drops, as flags say.
func fuzzDesiredPodSet(name string, replicasN int, image, labelSpec string, flags uint8) (*podsetv1alpha1.PodSet, *corev1.SecurityContext, []corev1.Capability) {
	sc := &corev1.SecurityContext{}
	switch {
	case flags&fuzzReadOnlyFalse != 0:
		sc.ReadOnlyRootFilesystem = ptr.To(false)
	case flags&fuzzReadOnlyTrue != 0:
		sc.ReadOnlyRootFilesystem = ptr.To(true)
	}
	var drop []corev1.Capability
	if flags&fuzzDropNetRaw != 0 {
		drop = append(drop, "NET_RAW")
	}
	if flags&fuzzDropAll != 0 {
		drop = append(drop, "ALL")
	}
	if drop != nil {
		sc.Capabilities = &corev1.Capabilities{Drop: drop}
	}
	if *sc == (corev1.SecurityContext{}) && flags&fuzzNoPodSC != 0 {
		sc = nil
	}
	ps := makePodSet(name).Replicas(int32(replicasN)).Obj()
	ps.Spec.Template.Labels = fuzzLabels(labelSpec)
	spec := &ps.Spec.Template.Spec
	spec.Containers = []corev1.Container{{Name: "app", Image: image, SecurityContext: sc.DeepCopy()}}
	if flags&fuzzInitContainer != 0 {
		spec.InitContainers = []corev1.Container{{Name: "init", Image: image, SecurityContext: sc.DeepCopy()}}
	}
	switch {
	case flags&fuzzNoPodSC != 0:
		spec.SecurityContext = nil
	case flags&fuzzLocalhost != 0:
		spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("p.json")}
	}
	if flags&fuzzAutomountTrue != 0 {
		spec.AutomountServiceAccountToken = ptr.To(true)
	}
	return ps, sc, drop
}

// checkDesiredIdentity checks the desired pod's name, namespace, labels
// and controller reference.
func checkDesiredIdentity(t *testing.T, ps *podsetv1alpha1.PodSet, pod *corev1ac.PodApplyConfiguration, ordinal int, hash string) {
	t.Helper()
	name := ps.Name
	// The name parses back to the ordinal.
	if got, ok := PodOrdinal(name, ptr.Deref(pod.Name, "")); !ok || got != ordinal {
		t.Fatalf("podOrdinal(%q, %q) = %d, %v; want %d, true", name, ptr.Deref(pod.Name, ""), got, ok, ordinal)
	}
	if ptr.Deref(pod.Namespace, "") != testNamespace {
		t.Errorf("namespace = %v, want %s", pod.Namespace, testNamespace)
	}

	// The operator's labels win; every other template label is kept.
	wantLabels := maps.Clone(ps.Spec.Template.Labels)
	if wantLabels == nil {
		wantLabels = map[string]string{}
	}
	wantLabels[podsetv1alpha1.NameLabel] = name
	wantLabels[podsetv1alpha1.OrdinalLabel] = strconv.Itoa(ordinal)
	wantLabels[podsetv1alpha1.TemplateHashLabel] = hash
	if diff := cmp.Diff(wantLabels, pod.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if len(pod.OwnerReferences) != 1 {
		t.Fatalf("ownerReferences = %d, want 1", len(pod.OwnerReferences))
	}
	ref := pod.OwnerReferences[0]
	if !ptr.Deref(ref.Controller, false) || !ptr.Deref(ref.BlockOwnerDeletion, false) || ptr.Deref(ref.UID, "") != ps.UID ||
		ptr.Deref(ref.Name, "") != name || ptr.Deref(ref.Kind, "") != "PodSet" || ptr.Deref(ref.APIVersion, "") != "podset.dev/v1alpha1" {
		t.Errorf("ownerReference = %+v, want the controller reference of %s", ref, name)
	}
}

// checkDesiredHardening checks the desired pod's own hardening: the
// service account token, runAsNonRoot and the seccomp profile, and that
// its containers are the template's.
func checkDesiredHardening(t *testing.T, ps *podsetv1alpha1.PodSet, pod *corev1ac.PodApplyConfiguration, flags uint8) {
	t.Helper()
	spec := &ps.Spec.Template.Spec
	if got := ptr.Deref(pod.Spec.AutomountServiceAccountToken, true); got != ptr.Deref(spec.AutomountServiceAccountToken, false) {
		t.Errorf("automountServiceAccountToken = %v, want the template's or false", got)
	}
	psc := pod.Spec.SecurityContext
	if psc == nil || !ptr.Deref(psc.RunAsNonRoot, false) {
		t.Fatalf("pod securityContext.runAsNonRoot is not true")
	}
	wantSeccomp := corev1.SeccompProfileTypeRuntimeDefault
	if flags&fuzzLocalhost != 0 && flags&fuzzNoPodSC == 0 {
		wantSeccomp = corev1.SeccompProfileTypeLocalhost
	}
	if psc.SeccompProfile == nil || ptr.Deref(psc.SeccompProfile.Type, "") != wantSeccomp {
		t.Errorf("pod seccompProfile = %+v, want %s", psc.SeccompProfile, wantSeccomp)
	}
	if len(pod.Spec.Containers) != len(spec.Containers) || len(pod.Spec.InitContainers) != len(spec.InitContainers) {
		t.Fatalf("desiredPod() changed the number of containers")
	}
}

// checkContainerHardening checks a container of the desired pod: the
// template's image, no privilege escalation, the template's read-only root
// or true, and ALL dropped beside the template's drops.
func checkContainerHardening(t *testing.T, c corev1ac.ContainerApplyConfiguration, image string, sc *corev1.SecurityContext, drop []corev1.Capability) {
	t.Helper()
	name := ptr.Deref(c.Name, "")
	if ptr.Deref(c.Image, "") != image {
		t.Errorf("container %s: image = %q, want %q", name, ptr.Deref(c.Image, ""), image)
	}
	csc := c.SecurityContext
	if csc == nil {
		t.Fatalf("container %s: no securityContext", name)
	}
	if ptr.Deref(csc.AllowPrivilegeEscalation, true) {
		t.Errorf("container %s: allowPrivilegeEscalation is not false", name)
	}
	var templateRO *bool
	if sc != nil {
		templateRO = sc.ReadOnlyRootFilesystem
	}
	if csc.ReadOnlyRootFilesystem == nil || *csc.ReadOnlyRootFilesystem != ptr.Deref(templateRO, true) {
		t.Errorf("container %s: readOnlyRootFilesystem = %v, want the template's or true", name, csc.ReadOnlyRootFilesystem)
	}
	if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Errorf("container %s: capabilities.drop lacks ALL", name)
		return
	}
	for _, d := range drop {
		if !slices.Contains(csc.Capabilities.Drop, d) {
			t.Errorf("container %s: capabilities.drop lost the template's %s", name, d)
		}
	}
	if n := len(csc.Capabilities.Drop); n != len(drop) && n != len(drop)+1 {
		t.Errorf("container %s: capabilities.drop = %v from %v", name, csc.Capabilities.Drop, drop)
	}
}

// fuzzSpecialNames are pod names without a valid ordinal of PodSet "web",
// or with one past the usual range.
var fuzzSpecialNames = []string{
	"web-01", "web-x", "web-", "webby-1", "web-1-2", "web-00", "web-9999", "web-10000",
	"web--1", "web-+1", "web", "api-0", "web-63", "web-64", "web-100", "web-1a",
}

// fuzzPod is one pod of FuzzPlanPods with what the fuzzer chose for it.
type fuzzPod struct {
	pod        corev1.Pod
	inFlight   bool
	controlled bool
}

// fuzzPods decodes 4 bytes per pod: name, phase and state, ownership, and
// template hash and drift. A name seen before is skipped: a namespace holds
// one pod per name.
func fuzzPods(ps *podsetv1alpha1.PodSet, hash string, data []byte) []fuzzPod {
	var out []fuzzPod
	seen := map[string]bool{}
	for i := 0; i+4 <= len(data); i += 4 {
		b := data[i : i+4]
		name := PodName("web", int(b[0])%64)
		if b[0] >= 240 {
			name = fuzzSpecialNames[b[0]-240]
		}
		if seen[name] {
			continue
		}
		seen[name] = true

		out = append(out, fuzzPodOf(ps, hash, name, b))
	}
	return out
}

// fuzzPodOf is the pod called name that fuzzPods decodes from 4 bytes b:
// its ownership (b[2]), revision (b[3]) and state (b[1]).
func fuzzPodOf(ps *podsetv1alpha1.PodSet, hash, name string, b []byte) fuzzPod {
	p := makePod(name)
	controlled := false
	switch b[2] % 5 {
	case 0, 1:
		p.controlledBy(ps)
		controlled = true
	case 2:
		p.label(podsetv1alpha1.NameLabel, "web")
	case 3:
		p.controlledByOther("other-uid").label(podsetv1alpha1.NameLabel, "web")
	case 4:
		p.controlledBy(ps)
		p.pod.OwnerReferences[0].Controller = ptr.To(false)
	}
	fuzzRevision(p, hash, b[3], controlled)
	fuzzState(p, b[1], b[3], controlled)
	return fuzzPod{pod: p.obj(), inFlight: b[1]&16 != 0, controlled: controlled}
}

// fuzzRevision gives a pod its revision from byte b3: the current one, an
// unknown one or, controlled, the older fuzzOld; and, controlled, the
// gate, a resize by someone else and drift.
func fuzzRevision(p *podBuilder, hash string, b3 byte, controlled bool) {
	switch {
	case controlled && b3&32 != 0:
		// Made from the older revision fuzzOld, which differs only in
		// the image: updated in place where it can be.
		p.hash(fuzzOld)
		p.image("app", fuzzOldImage)
	case b3&1 == 0:
		p.hash(hash)
	default:
		p.hash("stale")
	}
	if controlled && b3&64 != 0 {
		p.pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}}
	}
	if controlled && b3&128 != 0 {
		// Resized by someone else, as the VerticalPodAutoscaler does.
		p.pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
		}
	}
	if controlled {
		if b3&2 != 0 {
			p.withoutLabel(podsetv1alpha1.OrdinalLabel)
		}
		if b3&4 != 0 {
			p.image("app", "drifted")
		}
		if b3&8 != 0 {
			p.blockOwnerDeletion(false)
		}
	}
}

// fuzzState gives a pod its phase, readiness, termination, drain hook,
// node and gate condition from bytes b1 and b3.
func fuzzState(p *podBuilder, b1, b3 byte, controlled bool) {
	switch b1 & 3 {
	case 0:
		p.phase(corev1.PodPending)
	case 1:
		switch {
		case b1&4 != 0 && b3&16 != 0:
			p.readySince(testNow.Add(-3 * time.Second))
		case b1&4 != 0:
			p.readySince(testNow.Add(-time.Hour))
		default:
			p.running()
		}
	case 2:
		p.phase(corev1.PodSucceeded)
	case 3:
		p.phase(corev1.PodFailed)
	}
	if b1&8 != 0 {
		p.terminating()
	}
	if controlled && b1&128 != 0 {
		// Made with the drain hook (an operator of this release);
		// the others were made before it gave one.
		p.preStop()
	}
	// The node: the lost one (when FuzzPlanPods turns lost-node
	// replacement on) or a healthy one.
	if b1&64 != 0 {
		p.on(fuzzLostNode)
	} else {
		p.on("good")
	}
	if len(p.pod.Spec.ReadinessGates) > 0 {
		gate := corev1.ConditionTrue
		if b1&32 != 0 {
			gate = corev1.ConditionFalse
		}
		p.pod.Status.Conditions = append(p.pod.Status.Conditions, corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: gate})
	}
}

// fuzzOld is the hash of FuzzPlanPods' older revision, whose template
// differs from the current one only in the image fuzzOldImage.
const (
	fuzzOld      = "old"
	fuzzOldImage = "busybox:1.35"
)

// fuzzLostNode is the node FuzzPlanPods loses, an hour ago.
const fuzzLostNode = "lost"

func FuzzPlanPods(f *testing.F) {
	// replicas, maxUnavailable, percent, onDelete, pods (4 bytes each:
	// name, phase|ready<<2|terminating<<3|inFlight<<4, ownership,
	// stale|drift|readyRecently<<4), rollout (partition | minReady<<6).
	// A pod's phase byte bit 6 puts it on the lost node; rollout bit 4
	// turns lost-node replacement on, bit 3 with it loses the cluster's
	// only node (paused).
	f.Add(uint8(3), uint8(0), false, false, []byte{}, uint8(0))
	f.Add(uint8(3), uint8(0), false, false, []byte{0, 5, 0, 1, 1, 5, 0, 1, 2, 5, 0, 1}, uint8(0))
	f.Add(uint8(2), uint8(1), false, false, []byte{0, 5, 0, 0, 1, 1, 0, 1, 5, 5, 0, 0, 240, 5, 0, 0, 9, 13, 0, 0}, uint8(0))
	f.Add(uint8(4), uint8(49), true, false, []byte{0, 5, 2, 1, 1, 2, 3, 0, 2, 3, 0, 1, 3, 21, 0, 1, 7, 5, 2, 0}, uint8(0))
	f.Add(uint8(5), uint8(1), false, true, []byte{0, 5, 0, 1, 1, 1, 0, 1, 2, 5, 4, 14, 3, 0, 1, 6}, uint8(0))
	f.Add(uint8(0), uint8(0), false, false, []byte{0, 5, 0, 0, 241, 5, 0, 0, 247, 5, 1, 0}, uint8(0))
	f.Add(uint8(4), uint8(1), false, false, []byte{0, 5, 0, 1, 1, 5, 0, 17, 3, 5, 0, 1, 2, 5, 0, 16}, uint8(2|64))
	// An older revision with another image and less cpu: gated pods, one
	// resized by someone else, one drifted, one with its gate closed and
	// out of Ready; in place, and under Recreate.
	f.Add(uint8(4), uint8(99), true, false, []byte{0, 5, 0, 96, 1, 5, 0, 224, 2, 5, 0, 98, 3, 33, 0, 224}, uint8(32))
	f.Add(uint8(4), uint8(99), true, false, []byte{0, 5, 0, 96, 1, 5, 0, 224, 2, 5, 0, 98, 3, 33, 0, 224}, uint8(32|128))

	// Ordinals from 3 (replicas 4): web-0 and web-1 are surplus, web-3
	// conflicts, web-4 is stale and held by the partition (start+1).
	f.Add(uint8(51+4), uint8(1), false, false, []byte{0, 5, 0, 0, 1, 5, 0, 0, 3, 5, 3, 0, 4, 5, 0, 1, 5, 5, 0, 1}, uint8(1))
	// Ordinals from 12, under OnDelete.
	f.Add(uint8(4*51+3), uint8(1), false, true, []byte{12, 5, 0, 1, 13, 5, 0, 0, 2, 5, 0, 0}, uint8(0))

	// Lost-node replacement: two pods on the lost node (one evicted,
	// terminating) and one on a healthy node; then the cluster's only node
	// lost (paused).
	f.Add(uint8(3), uint8(0), false, false, []byte{0, 69, 0, 0, 1, 77, 0, 0, 2, 5, 0, 0}, uint8(16))
	f.Add(uint8(3), uint8(1), false, false, []byte{0, 69, 0, 0, 1, 77, 0, 1, 2, 1, 0, 0}, uint8(16|8))
	f.Fuzz(func(t *testing.T, replicasIn, maxUnavailableIn uint8, percent, onDelete bool, data []byte, rollout uint8) {
		pf := newPlanFuzz(t, replicasIn, maxUnavailableIn, percent, onDelete, data, rollout)
		pf.checkUnmodified()
		pf.checkSlim()
		pf.checkCreates()
		pf.listWrites()
		pf.checkPrune()
		pf.checkFinishedAndRepaired()
		pf.checkForeign()
		pf.checkRollout()
		pf.checkLost()
		pf.checkEmpty()
		pf.checkPreview()
	})
}

// newPlanFuzz makes FuzzPlanPods' case from its inputs, and plans it.
func newPlanFuzz(t *testing.T, replicasIn, maxUnavailableIn uint8, percent, onDelete bool, data []byte, rollout uint8) *planFuzz {
	b := makePodSet("web").Replicas(int32(replicasIn) % 51)
	// replicasIn's high values also move spec.ordinals.start, so the
	// wanted ordinals of pods 0..63 begin at 0, 3, 6, 9 or 12.
	if start := int32(replicasIn) / 51 * 3; start > 0 {
		b.OrdinalsStart(start)
	}
	if percent {
		b.MaxUnavailableOf(intstr.FromString(fmt.Sprintf("%d%%", 1+int(maxUnavailableIn)%100)))
	} else {
		b.MaxUnavailableOf(intstr.FromInt32(1 + int32(maxUnavailableIn)%10))
	}
	if onDelete {
		// OnDelete alone: no rolling update's budget left behind.
		b.Mutate(func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy = podsetv1alpha1.PodSetUpdateStrategy{Type: podsetv1alpha1.OnDeleteStrategyType}
		})
	} else {
		b.Partition(int32(rollout&63) % 8)
	}
	if rollout&64 != 0 {
		b.MinReadySeconds(10)
	}
	if rollout&128 != 0 {
		b.Recreate()
	}
	var nodes Nodes
	lostOn := rollout&16 != 0
	if lostOn {
		b.LostNodeAfter(60)
		nodes = Nodes{Lost: map[string]time.Time{fuzzLostNode: testNow.Add(-time.Hour)}, LostInCluster: 1, Total: 3}
		if rollout&8 != 0 {
			nodes.Total = 1
		}
	}
	b.Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}
	})
	ps := b.Obj()
	hash := TemplateHash(ps)
	startN, endN := Start(ps), Start(ps)+int(Replicas(ps))
	partitionN := UpdateFrom(ps)
	wanted := func(o int) bool { return o >= startN && o < endN }
	minReady := minReadySeconds(ps)

	fuzzed := fuzzPods(ps, hash, data)
	var pods []corev1.Pod
	inFlightSet := map[string]bool{}
	for _, fp := range fuzzed {
		pods = append(pods, fp.pod)
		if fp.inFlight {
			inFlightSet[fp.pod.Name] = true
		}
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	before := deepCopyPods(pods)
	inFlight := func(name string) bool { return inFlightSet[name] }

	in := testInput(ps, inFlight)
	// maxUnavailableIn's high half: no Service selects the pods, so no
	// EndpointSlice lists them; otherwise the slices list every Ready
	// pod as ready.
	served := maxUnavailableIn < 128
	if served {
		in.Endpoints = Endpoints{}
		for i := range pods {
			if podReady(&pods[i]) {
				in.Endpoints[pods[i].UID] = EndpointState{Listed: true}
			}
		}
	}
	oldTmpl := ps.Spec.Template.DeepCopy()
	oldTmpl.Spec.Containers[0].Image = fuzzOldImage
	if rollout&32 != 0 {
		// The older revision also asked for less cpu: the update
		// resizes too.
		oldTmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("5m")
	}
	in.Revs.Templates[fuzzOld] = oldTmpl
	planOf := func(pods []corev1.Pod) Plan {
		v := NewView(ps, in.Revs, pods, in.Now)
		v.Nodes = nodes
		return v.Plan(in.Input)
	}
	plan := planOf(pods)
	// drainWaits reports whether a controlled pod the plan means to
	// stop waits, its gate closed, for its own kubelet to report it not
	// Ready (gate.go, step 2): a restart in place waits for it as long
	// as it takes (only that kubelet can carry the restart out), a
	// deletion for kubeletSilence from when the gate closed. Fuzzed pods
	// have no preStop hooks, no EndpointSlices and no Drains, and their
	// Ready conditions' times are zero or an hour ago: no other wait of
	// the drain holds one.
	drainWaits := func(p *corev1.Pod, deleting bool) bool {
		if !gateClosed(p) || kubeletNotReady(p) {
			return false
		}
		return !deleting || testNow.Before(gateCondition(p).LastTransitionTime.Add(kubeletSilence))
	}
	// inPlace reports whether an out-of-date pod is updated in place:
	// made from fuzzOld, which differs only in what a running pod can
	// take, with the gate, under InPlaceIfPossible.
	inPlace := func(p *corev1.Pod) bool {
		return InPlacePolicy(ps) && p.Labels[podsetv1alpha1.TemplateHashLabel] == fuzzOld && hasGate(p)
	}
	// lostDue reports a desired pod due for replacement: controlled,
	// settled, on the lost node, with the field on.
	lostDue := func(p *corev1.Pod) bool {
		o, ok := PodOrdinal("web", p.Name)
		return lostOn && ok && o >= startN && o < endN && metav1.IsControlledBy(p, ps) && !inFlight(p.Name) && p.Spec.NodeName == fuzzLostNode
	}
	return &planFuzz{t: t, ps: ps, hash: hash, startN: startN, endN: endN, partitionN: partitionN, minReady: minReady, fuzzed: fuzzed, pods: pods, byName: byName, before: before, in: in, served: served, plan: plan, nodes: nodes, lostOn: lostOn, onDelete: onDelete, wanted: wanted, inFlight: inFlight, drainWaits: drainWaits, inPlace: inPlace, lostDue: lostDue, planOf: planOf}
}

// planFuzz is one case of FuzzPlanPods: the PodSet, its pods, what the
// pass knows, and the plan; each method checks one of its invariants.
type planFuzz struct {
	t          *testing.T
	ps         *podsetv1alpha1.PodSet
	hash       string
	startN     int
	endN       int
	partitionN int
	minReady   time.Duration
	fuzzed     []fuzzPod
	pods       []corev1.Pod
	byName     map[string]*corev1.Pod
	before     []corev1.Pod
	in         planArgs
	served     bool
	plan       Plan
	nodes      Nodes
	lostOn     bool
	onDelete   bool
	writtenIn  map[string]string
	wanted     func(int) bool
	inFlight   func(string) bool
	drainWaits func(*corev1.Pod, bool) bool
	inPlace    func(*corev1.Pod) bool
	lostDue    func(*corev1.Pod) bool
	planOf     func([]corev1.Pod) Plan
}

// checkUnmodified: planning leaves its pods as they were.
func (f *planFuzz) checkUnmodified() {
	t, pods, before := f.t, f.pods, f.before
	if diff := cmp.Diff(before, pods); diff != "" {
		t.Fatalf("planPods() modified its pods (-before +after):\n%s", diff)
	}
}

// checkSlim: the plan, the status and the pod predicate come out the same from slimmed pods.
func (f *planFuzz) checkSlim() {
	t, ps, pods, in, plan, planOf := f.t, f.ps, f.pods, f.in, f.plan, f.planOf
	// The cache holds pods as slimPod leaves them: the plan, the status
	// and the pod predicate must come out the same from those.
	slim := make([]corev1.Pod, len(pods))
	for i := range pods {
		s, err := SlimPod(pods[i].DeepCopy())
		if err != nil {
			t.Fatalf("slimPod(%s): %v", pods[i].Name, err)
		}
		slim[i] = *s.(*corev1.Pod)
	}
	if diff := cmp.Diff(namesOf(plan), namesOf(planOf(slim))); diff != "" {
		t.Errorf("planPods() of slimmed pods differs (-full +slim):\n%s", diff)
	}
	now := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	if diff := cmp.Diff(NewView(ps, in.Revs, pods, now.Time).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost}), NewView(ps, in.Revs, slim, now.Time).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})); diff != "" {
		t.Errorf("computeStatus() of slimmed pods differs (-full +slim):\n%s", diff)
	}
	for i := range pods {
		for j := range pods {
			if full, s := PodOutcomeChanged(&pods[i], &pods[j]), PodOutcomeChanged(&slim[i], &slim[j]); full != s {
				t.Errorf("podOutcomeChanged(%s, %s) = %v, but %v for the slimmed pods", pods[i].Name, pods[j].Name, full, s)
			}
		}
	}
}

// checkCreates: the creates, and the revisions of those the partition holds back.
func (f *planFuzz) checkCreates() {
	t, hash, startN, endN, partitionN, byName, plan, wanted, inFlight := f.t, f.hash, f.startN, f.endN, f.partitionN, f.byName, f.plan, f.wanted, f.inFlight
	// Creates: in range, free, not in flight, each once, and every
	// free ordinal not in flight.
	created := map[int]bool{}
	for _, o := range plan.Create {
		name := PodName("web", o)
		switch {
		case !wanted(o):
			t.Errorf("create %d, outside %d..%d", o, startN, endN-1)
		case byName[name] != nil:
			t.Errorf("create %d, but pod %s exists", o, name)
		case inFlight(name):
			t.Errorf("create %d, but %s has a write in flight", o, name)
		case created[o]:
			t.Errorf("create %d twice", o)
		}
		created[o] = true
	}
	for o := startN; o < endN; o++ {
		if name := PodName("web", o); byName[name] == nil && !inFlight(name) && !created[o] {
			t.Errorf("ordinal %d has no pod and no write in flight, but is not created", o)
		}
	}

	// Held-back ordinals: only those created below the partition get
	// another revision (none known here but the current one).
	for o, h := range plan.Revisions {
		if o >= partitionN || !created[o] || h == hash {
			t.Errorf("create %d from revision %s: partition %d, created %v", o, h, partitionN, created[o])
		}
	}
}

// listWrites: every pod written, by list, each once (writtenIn).
func (f *planFuzz) listWrites() {
	t, ps, in, served, plan, inFlight := f.t, f.ps, f.in, f.served, f.plan, f.inFlight
	// Writes: only controlled, settled pods, each in one list once.
	var updated, paused []*corev1.Pod
	for _, step := range plan.Update {
		updated = append(updated, step.Pod)
	}
	for _, step := range plan.Drain {
		paused = append(paused, step.Pod)
	}
	lists := map[string][]*corev1.Pod{
		"repair": plan.Repair, "prune": plan.Prune, "replaceFinished": plan.ReplaceFinished, "rollout": plan.Rollout,
		"update": updated, "pause": paused,
	}
	checkNoForbiddenField(t, ps, in.Revs, plan, served)
	f.writtenIn = map[string]string{}
	writtenIn := f.writtenIn
	for list, written := range lists {
		for _, p := range written {
			if prev, ok := writtenIn[p.Name]; ok {
				t.Errorf("pod %s is in %s and %s", p.Name, prev, list)
			}
			writtenIn[p.Name] = list
			if !metav1.IsControlledBy(p, ps) {
				t.Errorf("pod %s, not controlled by the PodSet, is in %s", p.Name, list)
			}
			if inFlight(p.Name) {
				t.Errorf("pod %s, with a write in flight, is in %s", p.Name, list)
			}
			if p.DeletionTimestamp != nil {
				t.Errorf("pod %s, terminating, is in %s", p.Name, list)
			}
		}
	}
}

// checkPrune: the surplus pods are pruned or drained first.
func (f *planFuzz) checkPrune() {
	t, ps, startN, endN, fuzzed, served, plan, wanted, drainWaits, writtenIn := f.t, f.ps, f.startN, f.endN, f.fuzzed, f.served, f.plan, f.wanted, f.drainWaits, f.writtenIn
	// Prune: only surplus or unnamed pods, highest first, and all of them.
	for i, p := range plan.Prune {
		if o, ok := PodOrdinal("web", p.Name); ok && wanted(o) {
			t.Errorf("prune %s, a pod with a wanted ordinal (%d..%d)", p.Name, startN, endN-1)
		}
		if i > 0 && ordinalOf(ps, plan.Prune[i-1]) < ordinalOf(ps, p) {
			t.Errorf("prune order %s before %s: not highest first", plan.Prune[i-1].Name, p.Name)
		}
	}
	// A Ready surplus pod with the gate that a slice lists is drained
	// first: its gate closes (pause), and it is pruned once drained;
	// one that no slice lists (its Ready is an hour old, or of unknown
	// time) is pruned at once; one that waits for its kubelet is left
	// alone.
	surplusPaused := map[string]bool{}
	for _, step := range plan.Drain {
		if step.Way.Why == WhySurplus {
			surplusPaused[step.Pod.Name] = true
		}
	}
	for _, fp := range fuzzed {
		p := &fp.pod
		o, ok := PodOrdinal("web", p.Name)
		if !fp.controlled || fp.inFlight || p.DeletionTimestamp != nil || ok && wanted(o) {
			continue
		}
		switch {
		case drainsFirst(ps, p) && served:
			if !surplusPaused[p.Name] {
				t.Errorf("surplus pod %s, Ready with the gate, is not drained first (in %q)", p.Name, writtenIn[p.Name])
			}
		case drainWaits(p, true):
			if list, ok := writtenIn[p.Name]; ok {
				t.Errorf("surplus pod %s waits for its kubelet, but is in %s", p.Name, list)
			}
		case writtenIn[p.Name] != "prune":
			t.Errorf("surplus pod %s is not pruned", p.Name)
		}
	}
}

// checkFinishedAndRepaired: finished pods are replaced, repaired ones current or held back.
func (f *planFuzz) checkFinishedAndRepaired() {
	t, hash, partitionN, in, plan, onDelete := f.t, f.hash, f.partitionN, f.in, f.plan, f.onDelete
	// Finished pods are replaced; repaired pods are current, or held
	// back (OnDelete, the partition) on a known revision.
	for _, p := range plan.ReplaceFinished {
		if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("replaceFinished has %s in phase %s", p.Name, p.Status.Phase)
		}
	}
	for _, p := range plan.Repair {
		o, _ := PodOrdinal("web", p.Name)
		if h := p.Labels[podsetv1alpha1.TemplateHashLabel]; h != hash && (!onDelete && o >= partitionN || !in.Revs.Known(h)) {
			t.Errorf("repair has the out-of-date pod %s", p.Name)
		}
	}
}

// checkForeign: pods the PodSet does not control are reported, never written.
func (f *planFuzz) checkForeign() {
	t, fuzzed, plan, wanted := f.t, f.fuzzed, f.plan, f.wanted
	// Foreign pods: each a conflict or a stray, never written.
	foreign := map[string]bool{}
	for _, fp := range fuzzed {
		if !fp.controlled {
			foreign[fp.pod.Name] = true
		}
	}
	reported := map[string]int{}
	for _, n := range slices.Concat(plan.Conflicts, plan.Strays) {
		reported[n]++
		if !foreign[n] {
			t.Errorf("%s is reported as a conflict or stray but is controlled by the PodSet", n)
		}
	}
	for n := range foreign {
		if reported[n] != 1 {
			t.Errorf("foreign pod %s is reported %d times in conflicts and strays, want once", n, reported[n])
		}
	}
	for _, n := range plan.Conflicts {
		if o, ok := PodOrdinal("web", n); !ok || !wanted(o) {
			t.Errorf("conflict %s holds no name the PodSet needs", n)
		}
	}
}

// checkRollout: the rollout takes out-of-date pods only, within the budget.
func (f *planFuzz) checkRollout() {
	t, ps, hash, startN, endN, partitionN, minReady, byName, plan, onDelete, wanted, inFlight, lostDue := f.t, f.ps, f.hash, f.startN, f.endN, f.partitionN, f.minReady, f.byName, f.plan, f.onDelete, f.wanted, f.inFlight, f.lostDue
	// Rollout: out-of-date pods only; none with OnDelete; every unready
	// one; ready ones from the highest ordinal within the budget.
	if onDelete && len(plan.Rollout) > 0 {
		t.Fatalf("OnDelete rolled out %d pods", len(plan.Rollout))
	}
	unavailable := 0
	var staleReady []string
	for o := startN; o < endN; o++ {
		p := byName[PodName("web", o)]
		if p == nil || !metav1.IsControlledBy(p, ps) || inFlight(p.Name) || p.DeletionTimestamp != nil || !podAvailable(p, minReady, testNow) || lostDue(p) {
			unavailable++
			continue
		}
		if p.Labels[podsetv1alpha1.TemplateHashLabel] != hash && o >= partitionN {
			staleReady = append(staleReady, p.Name)
		}
	}
	budget := max(0, maxUnavailable(ps)-unavailable)
	var readyTaken []string
	for _, p := range f.taken() {
		if p.Labels[podsetv1alpha1.TemplateHashLabel] == hash {
			t.Errorf("rollout has the up-to-date pod %s", p.Name)
		}
		if o, ok := PodOrdinal("web", p.Name); !ok || !wanted(o) {
			t.Errorf("rollout has %s, which is not a desired ordinal", p.Name)
		} else if o < partitionN {
			t.Errorf("rollout has %s, below the partition %d", p.Name, partitionN)
		}
		if podReady(p) && !podAvailable(p, minReady, testNow) {
			t.Errorf("rollout takes %s, Ready but not yet available: it counts against the budget, it is not free", p.Name)
		}
		if podReady(p) {
			readyTaken = append(readyTaken, p.Name)
		}
	}
	slices.Reverse(readyTaken)
	if len(readyTaken) > budget {
		t.Errorf("rollout takes %d ready pods %v, budget %d (maxUnavailable %d, %d unavailable)",
			len(readyTaken), readyTaken, budget, maxUnavailable(ps), unavailable)
	}
	if !onDelete {
		if want := min(budget, len(staleReady)); len(readyTaken) != want {
			t.Errorf("rollout takes %d ready pods, want %d (budget %d, %d stale ready)", len(readyTaken), want, budget, len(staleReady))
		}
		slices.Reverse(staleReady)
		if want := staleReady[:len(readyTaken)]; !slices.Equal(readyTaken, want) {
			t.Errorf("rollout takes ready pods %v, want the highest ordinals %v", readyTaken, want)
		}
		f.checkUnreadyTaken()
	}
}

// checkUnreadyTaken: every unready out-of-date pod the strategy updates is
// recreated or updated in place, but for one that waits for its kubelet
// or is on the lost node.
func (f *planFuzz) checkUnreadyTaken() {
	for _, fp := range f.fuzzed {
		p := &fp.pod
		o, ok := PodOrdinal("web", p.Name)
		if fp.controlled && !fp.inFlight && p.DeletionTimestamp == nil && ok && f.wanted(o) && o >= f.partitionN &&
			p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded &&
			p.Labels[podsetv1alpha1.TemplateHashLabel] != f.hash && !podReady(p) && f.writtenIn[p.Name] != "rollout" && f.writtenIn[p.Name] != "update" &&
			!f.drainWaits(p, !f.inPlace(p)) && !f.lostDue(p) {
			f.t.Errorf("the unready out-of-date pod %s is neither recreated nor updated in place", p.Name)
		}
	}
}

// taken is the pods the rollout moves, by ordinal: recreated, drained
// for the rollout, or updated in place beyond labels and annotations.
func (f *planFuzz) taken() []*corev1.Pod {
	taken := slices.Clone(f.plan.Rollout)
	for _, step := range f.plan.Drain {
		if step.Way.Why != WhySurplus {
			taken = append(taken, step.Pod)
		}
	}
	for _, step := range f.plan.Update {
		if !step.Way.metadataOnly() {
			taken = append(taken, step.Pod)
		}
	}
	slices.SortFunc(taken, func(a, b *corev1.Pod) int { return ordinalOf(f.ps, a) - ordinalOf(f.ps, b) })
	return taken
}

// checkLost: the pods of the lost node are replaced within the budget, or held.
func (f *planFuzz) checkLost() {
	t, ps, startN, endN, minReady, byName, plan, nodes, lostOn, lostDue, writtenIn := f.t, f.ps, f.startN, f.endN, f.minReady, f.byName, f.plan, f.nodes, f.lostOn, f.lostDue, f.writtenIn
	// Pods of the lost node: desired, controlled, settled pods on it
	// only (terminating ones too), lowest ordinal first, as many as
	// maxUnavailable less the desired pods unavailable otherwise; none
	// while paused, and none with the field off.
	var due []string
	other := 0
	for o := startN; o < endN; o++ {
		p := byName[PodName("web", o)]
		switch {
		case p != nil && lostDue(p):
			due = append(due, p.Name)
		case p == nil || !metav1.IsControlledBy(p, ps) || p.DeletionTimestamp != nil || !podAvailable(p, minReady, testNow):
			if p == nil || !metav1.IsControlledBy(p, ps) || p.Spec.NodeName != fuzzLostNode || !lostOn {
				other++
			}
		}
	}
	var replaced, held []string
	for _, p := range plan.ReplaceLost {
		replaced = append(replaced, p.Name)
		if prev, ok := writtenIn[p.Name]; ok {
			t.Errorf("pod %s is in %s and replaceLost", p.Name, prev)
		}
		writtenIn[p.Name] = "replaceLost"
	}
	for _, p := range plan.LostHeld {
		held = append(held, p.Name)
	}
	switch {
	case !lostOn:
		if len(replaced)+len(held) > 0 {
			t.Errorf("lost-node replacement is off, but the plan replaces %v and holds %v", replaced, held)
		}
	case nodes.Partitioned():
		if len(replaced) > 0 || !slices.Equal(held, due) {
			t.Errorf("paused: replaces %v and holds %v, want none replaced and %v held", replaced, held, due)
		}
	default:
		want := due[:min(len(due), max(0, maxUnavailable(ps)-other))]
		if !slices.Equal(replaced, want) || len(held) > 0 {
			t.Errorf("replaces %v and holds %v; want %v replaced (due %v, maxUnavailable %d, %d unavailable otherwise)",
				replaced, held, want, due, maxUnavailable(ps), other)
		}
	}
}

// checkEmpty: a converged set is empty.
func (f *planFuzz) checkEmpty() {
	t, plan, writtenIn := f.t, f.plan, f.writtenIn
	// A converged set is empty.
	if plan.Empty() != (len(plan.Create) == 0 && len(writtenIn) == 0) {
		t.Errorf("empty() = %v with %d creates and %d pod writes", plan.Empty(), len(plan.Create), len(writtenIn))
	}
}

// checkPreview: the preview takes no pod twice and names what changes.
func (f *planFuzz) checkPreview() {
	t, ps, pods, in := f.t, f.ps, f.pods, f.in
	// The preview of the same pods (kubectl podset rollout preview)
	// takes no pod twice, and every pod it says changes is taken or
	// waits for the budget.
	preview := NewView(ps, in.Revs, pods, in.Now).Preview()
	previewed := map[string]bool{}
	for _, name := range slices.Concat(preview.AtOnce, slices.Concat(preview.Batches...), preview.Waiting) {
		if previewed[name] {
			t.Errorf("the preview takes %s twice: at once %v, batches %v, waiting %v", name, preview.AtOnce, preview.Batches, preview.Waiting)
		}
		previewed[name] = true
	}
	for _, c := range preview.Pods {
		switch c.Change {
		case ChangeMetadata, ChangeImage, ChangeResize, ChangeRecreate, ChangeDelete:
		case ChangeCreate:
			if c.Pod != nil {
				continue // a terminating pod: created once it is gone
			}
		default:
			continue
		}
		if !previewed[c.Name] {
			t.Errorf("the preview says %s is %s, but no batch takes it and it does not wait", c.Name, c.Change)
		}
	}
}

// checkNoForbiddenField checks what a plan sends to existing pods: nothing
// a running pod cannot change. Every apply keeps the cpu and memory the pod
// runs with and sends exactly the readiness gates it has, and otherwise
// differs from the pod's own revision's desired pod in images at most; a
// resize sends only cpu and memory, changing only what the template did; containers
// restart for a new image only once the pod is out of Ready by its
// kubelet's own word (it never reported the pod Ready, as for a Pending
// pod it has not started, or it reported it not Ready since: a gate the
// operator closed is not enough), or, when the preStop hooks of the
// containers that restart hold the drain, once its gate is closed; only
// pods with the gate have it closed;
// and no Ready pod is deleted undrained, but one no slice lists, which
// is never drained (served says the slices list every Ready pod; else
// none, and every Ready condition is an hour old or of unknown time, so
// no wait for a slice to list the pod is left).
func checkNoForbiddenField(t *testing.T, ps *podsetv1alpha1.PodSet, revs *Revisions, plan Plan, served bool) {
	t.Helper()
	for _, pod := range plan.Repair {
		checkApply(t, ps, revs, "repair", pod, pod.Labels[podsetv1alpha1.TemplateHashLabel])
	}
	for _, step := range plan.Update {
		checkApply(t, ps, revs, "update", step.Pod, revs.Update)
		if step.Way.Resize {
			checkResizeStep(t, ps, revs, step, served)
		}
		if !step.Way.Restart() {
			continue
		}
		// Whose drain it is: the operator's waits for the kubelet's own
		// not-Ready; one whose restarted containers' hooks hold the drain
		// (allPreStop) needs only the gate closed, as gate.go says (steps
		// 1, 3 and 5).
		hooked := allPreStop(ps, step.Pod, step.Way.Restarts)
		switch {
		case hooked && hasGate(step.Pod) && podReady(step.Pod) && !gateClosed(step.Pod):
			t.Errorf("update restarts the containers of %s, Ready, without closing its gate", step.Pod.Name)
		case !hooked && (kubeletReady(step.Pod) || gateClosed(step.Pod) && !kubeletNotReady(step.Pod)):
			t.Errorf("update restarts the containers of %s before its kubelet reports it not Ready", step.Pod.Name)
		}
	}
	for _, step := range plan.Drain {
		if !hasGate(step.Pod) {
			t.Errorf("pause closes the gate of %s, which has none", step.Pod.Name)
		}
		if !podReady(step.Pod) {
			t.Errorf("pause drains %s, which is not Ready: it should be stopped at once", step.Pod.Name)
		}
		if !served && !step.Way.InPlace && !allPreStop(ps, step.Pod, nil) {
			t.Errorf("pause drains %s to delete it, though no slice lists it: nothing routes to it", step.Pod.Name)
		}
	}
	// No Ready pod the operator controls and has gated is deleted before
	// it drained, but for a surplus pod no slice lists (served: the slices
	// list every Ready pod).
	for _, pod := range plan.Prune {
		if served && hasGate(pod) && podReady(pod) && !allPreStop(ps, pod, nil) {
			t.Errorf("%s is pruned while Ready and listed by a slice, without a drain", pod.Name)
		}
	}
	for _, pod := range plan.Rollout {
		if served && hasGate(pod) && podReady(pod) && !allPreStop(ps, pod, nil) {
			t.Errorf("%s is deleted while Ready, without a drain", pod.Name)
		}
	}
}

// checkApply checks the apply a plan's list sends to an existing pod for
// the revision hash: it keeps the pod's cpu and memory, readiness gates
// and preStop hooks, and is otherwise the desired pod of the pod's own
// revision but for images.
func checkApply(t *testing.T, ps *podsetv1alpha1.PodSet, revs *Revisions, list string, pod *corev1.Pod, hash string) {
	t.Helper()
	from, ok := revs.Templates[pod.Labels[podsetv1alpha1.TemplateHashLabel]]
	if !ok {
		t.Errorf("%s: pod %s runs an unknown revision, which cannot be updated in place", list, pod.Name)
		return
	}
	body, err := PodUpdate(ps, revs.Templates[hash], pod, hash)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range body.Spec.Containers {
		checkApplyResources(t, list, pod, c)
		checkApplyHook(t, list, pod, c)
	}
	var gates []corev1.PodReadinessGate
	for _, g := range body.Spec.ReadinessGates {
		gates = append(gates, corev1.PodReadinessGate{ConditionType: *g.ConditionType})
	}
	if diff := cmp.Diff(pod.Spec.ReadinessGates, gates, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: the apply to pod %s changes its readiness gates (-pod +sent):\n%s", list, pod.Name, diff)
	}
	// Beyond images, gates, resources and hooks (checked above), the apply
	// is the desired pod of the revision the pod was made from.
	was, err := PodFromTemplate(ps, from, ordinalOf(ps, pod), pod.Labels[podsetv1alpha1.TemplateHashLabel])
	if err != nil {
		t.Fatal(err)
	}
	strip := func(spec *corev1ac.PodSpecApplyConfiguration) *corev1ac.PodSpecApplyConfiguration {
		out := *spec
		out.ReadinessGates = nil
		out.Containers = slices.Clone(spec.Containers)
		for i := range out.Containers {
			out.Containers[i].Image = nil
			out.Containers[i].Resources = nil
			out.Containers[i].Lifecycle = nil
		}
		return &out
	}
	if diff := cmp.Diff(strip(was.Spec), strip(body.Spec)); diff != "" {
		t.Errorf("%s: the apply to pod %s changes more than images (-its revision +sent):\n%s", list, pod.Name, diff)
	}
}

// checkApplyResources checks that the apply of container c to pod keeps
// the cpu and memory the pod runs with.
func checkApplyResources(t *testing.T, list string, pod *corev1.Pod, c corev1ac.ContainerApplyConfiguration) {
	t.Helper()
	i := slices.IndexFunc(pod.Spec.Containers, func(pc corev1.Container) bool { return pc.Name == *c.Name })
	if c.Resources == nil || i < 0 {
		return
	}
	for _, pair := range [][2]*corev1.ResourceList{{c.Resources.Requests, &pod.Spec.Containers[i].Resources.Requests}, {c.Resources.Limits, &pod.Spec.Containers[i].Resources.Limits}} {
		if pair[0] == nil {
			continue
		}
		for name, q := range *pair[0] {
			if have, ok := (*pair[1])[name]; ok && !have.Equal(q) {
				t.Errorf("%s: the apply to pod %s changes %s of %s from %s to %s", list, pod.Name, name, *c.Name, have.String(), q.String())
			}
		}
	}
}

// checkApplyHook checks that the apply of container c to pod sends the
// pod's own preStop hook: a lifecycle cannot change.
func checkApplyHook(t *testing.T, list string, pod *corev1.Pod, c corev1ac.ContainerApplyConfiguration) {
	t.Helper()
	i := slices.IndexFunc(pod.Spec.Containers, func(pc corev1.Container) bool { return pc.Name == *c.Name })
	var sent, has *corev1.LifecycleHandler
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		sent = &corev1.LifecycleHandler{}
		if err := Convert(c.Lifecycle.PreStop, sent); err != nil {
			t.Fatal(err)
		}
	}
	if i >= 0 && pod.Spec.Containers[i].Lifecycle != nil {
		has = pod.Spec.Containers[i].Lifecycle.PreStop
	}
	if diff := cmp.Diff(has, sent); diff != "" {
		t.Errorf("%s: the apply to pod %s changes the preStop hook of %s (-pod +sent):\n%s", list, pod.Name, *c.Name, diff)
	}
}

// checkResize checks a pod's resize: it sends cpu and memory only, the
// new template's where it changed them, the pod's own elsewhere.
func checkResize(t *testing.T, ps *podsetv1alpha1.PodSet, revs *Revisions, pod *corev1.Pod) {
	t.Helper()
	from := revs.Templates[pod.Labels[podsetv1alpha1.TemplateHashLabel]]
	to := revs.Templates[revs.Update]
	resize := PodResize(ps, from, to, pod)
	if resize == nil {
		return
	}
	for _, c := range resize.Spec.Containers {
		i := slices.IndexFunc(to.Spec.Containers, func(tc corev1.Container) bool { return tc.Name == *c.Name })
		j := slices.IndexFunc(pod.Spec.Containers, func(pc corev1.Container) bool { return pc.Name == *c.Name })
		k := slices.IndexFunc(from.Spec.Containers, func(fc corev1.Container) bool { return fc.Name == *c.Name })
		if i < 0 || j < 0 || k < 0 {
			t.Errorf("resize of %s names container %s, which is not in both revisions and the pod", pod.Name, *c.Name)
			continue
		}
		for _, lists := range [][4]corev1.ResourceList{
			{ptr.Deref(c.Resources.Requests, nil), to.Spec.Containers[i].Resources.Requests, from.Spec.Containers[k].Resources.Requests, pod.Spec.Containers[j].Resources.Requests},
			{ptr.Deref(c.Resources.Limits, nil), to.Spec.Containers[i].Resources.Limits, from.Spec.Containers[k].Resources.Limits, pod.Spec.Containers[j].Resources.Limits},
		} {
			checkResized(t, pod.Name, lists[0], lists[1], lists[2], lists[3])
		}
	}
}

// checkResized checks the quantities a resize of pod sends: cpu and
// memory only; those the template changed (from was to want) as it
// changed them, the others as the pod has them.
func checkResized(t *testing.T, pod string, sent, want, was, has corev1.ResourceList) {
	t.Helper()
	for name, q := range sent {
		switch {
		case name != corev1.ResourceCPU && name != corev1.ResourceMemory:
			t.Errorf("resize of %s sends %s", pod, name)
		case !want[name].Equal(was[name]) && !q.Equal(want[name]):
			t.Errorf("resize of %s sends %s %s, the template changed it to %s", pod, name, q.String(), ptr.To(want[name]).String())
		case want[name].Equal(was[name]) && !q.Equal(has[name]):
			t.Errorf("resize of %s changes %s from %s to %s, which the template did not change", pod, name, ptr.To(has[name]).String(), q.String())
		}
	}
}

// drainsFirst reports whether the operator drains a pod before it deletes
// it where a slice lists it: the pod is Ready, carries the gate, and not
// every container has a preStop hook that holds it for the drain.
func drainsFirst(ps *podsetv1alpha1.PodSet, pod *corev1.Pod) bool {
	return hasGate(pod) && podReady(pod) && !allPreStop(ps, pod, nil)
}

// checkResizeStep checks a resize the plan sends: only cpu and memory,
// and, should the API server refuse it and the pod be recreated, drained
// first where something routes to it, at once where nothing does.
func checkResizeStep(t *testing.T, ps *podsetv1alpha1.PodSet, revs *Revisions, step Step, served bool) {
	t.Helper()
	checkResize(t, ps, revs, step.Pod)
	if want := drainsFirst(ps, step.Pod) && served; step.DrainIfRefused != want {
		t.Errorf("resize of %s: DrainIfRefused %v, want %v (Ready %v, served %v)", step.Pod.Name, step.DrainIfRefused, want, podReady(step.Pod), served)
	}
}
