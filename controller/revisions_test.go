package controller

import (
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podset-dev/podset-operator/internal/podset"
)

// TestSyncRevisions checks what syncRevisions sends for each plan, as
// StatefulSet's controller writes its revisions: a missing revision is
// created, never applied (the API server keeps a revision's data to the
// byte, and an apply would send it again), and a rollback renumbers the
// old revision with a merge patch of its number alone, on the
// resourceVersion the pass saw. A name already taken and a revision
// changed since are left to the next pass; other errors are returned.
func TestSyncRevisions(t *testing.T) {
	ps := executePodSet()
	// plan is what a pass plans for ps with the revisions in history;
	// stored is the revision of ps with another image as the API server
	// holds it, with a number and a resourceVersion.
	plan := func(history ...appsv1.ControllerRevision) (podset.RevisionPlan, *podset.Revisions) {
		revs := podset.NewRevisions(ps, history)
		return (&podset.View{PodSet: ps, Revs: revs}).PlanRevisions(nil), revs
	}
	stored := func(image string, number int64, rv string) appsv1.ControllerRevision {
		other := executePodSet()
		other.Spec.Template.Spec.Containers[0].Image = image
		p := (&podset.View{PodSet: other, Revs: podset.NewRevisions(other, nil)}).PlanRevisions(nil)
		cr := *p.Write
		cr.Revision, cr.ResourceVersion = number, rv
		return cr
	}
	current := stored("app:1", 1, "7")
	newer := stored("app:2", 3, "9")
	taken := apierrors.NewAlreadyExists(schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}, current.Name)
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}, current.Name, nil)

	cases := map[string]struct {
		history []appsv1.ControllerRevision
		fail    map[string]error
		want    []string
		err     bool
	}{
		"a new template: its revision is created": {
			want: []string{"POST controllerrevisions/" + current.Name},
		},
		"the current template's revision is the newest: nothing": {
			history: []appsv1.ControllerRevision{current},
		},
		"an older template came back: its revision is renumbered the newest": {
			history: []appsv1.ControllerRevision{current, newer},
			want:    []string{`PATCH controllerrevisions/` + current.Name + ` {"metadata":{"resourceVersion":"7"},"revision":4}`},
		},
		"the name is taken: left to the next pass": {
			fail: map[string]error{"POST controllerrevisions/" + current.Name: taken},
			want: []string{"POST controllerrevisions/" + current.Name},
		},
		"the revision changed since the pass saw it: left to the next pass": {
			history: []appsv1.ControllerRevision{current, newer},
			fail:    map[string]error{"PATCH controllerrevisions/" + current.Name: conflict},
			want:    []string{`PATCH controllerrevisions/` + current.Name + ` {"metadata":{"resourceVersion":"7"},"revision":4}`},
		},
		"the create fails otherwise: the pass fails": {
			fail: map[string]error{"POST controllerrevisions/" + current.Name: errors.New("etcdserver: request timed out")},
			want: []string{"POST controllerrevisions/" + current.Name},
			err:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := &recordingWriter{fail: tc.fail}
			r := testReconciler(w, nil)
			p, revs := plan(tc.history...)
			err := r.syncRevisions(t.Context(), p, revs)
			if (err != nil) != tc.err {
				t.Errorf("error %v, want one: %t", err, tc.err)
			}
			if got := w.sent(); !slices.Equal(got, tc.want) {
				t.Errorf("writes:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}
