package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the mappings asked of it.
type countingMapper struct {
	meta.RESTMapper
	asked int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.asked++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func TestMapperRemembersAKindAtOneVersion(t *testing.T) {
	podSet := schema.GroupVersionKind{Group: "podset.dev", Version: "v1alpha1", Kind: "PodSet"}
	known := meta.NewDefaultRESTMapper([]schema.GroupVersion{podSet.GroupVersion()})
	known.Add(podSet, meta.RESTScopeNamespace)
	under := &countingMapper{RESTMapper: known}
	m := &rememberingMapper{RESTMapper: under}

	for range 3 {
		got, err := m.RESTMapping(podSet.GroupKind(), podSet.Version)
		if err != nil {
			t.Fatal(err)
		}
		if got.Resource.Resource != "podsets" || got.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("mapping %+v, want podsets, namespaced", got)
		}
		got.Resource.Resource = "changed by a caller"
	}
	if under.asked != 1 {
		t.Errorf("the dynamic mapper was asked %d times for one kind at one version, want 1", under.asked)
	}

	// Asked at no version (the preferred one, which may change), it asks
	// every time.
	for range 2 {
		if _, err := m.RESTMapping(podSet.GroupKind()); err != nil {
			t.Fatal(err)
		}
	}
	if under.asked != 3 {
		t.Errorf("the dynamic mapper was asked %d times, want 3: a mapping at no version is not remembered", under.asked)
	}

	// A kind not found is asked again: its CRD may be installed later.
	later := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Later"}
	if _, err := m.RESTMapping(later.GroupKind(), later.Version); !meta.IsNoMatchError(err) {
		t.Fatalf("a kind not served: %v, want a no-match error", err)
	}
	known.Add(later, meta.RESTScopeRoot)
	got, err := m.RESTMapping(later.GroupKind(), later.Version)
	if err != nil {
		t.Fatalf("a kind served since it was first asked: %v", err)
	}
	if got.Scope.Name() != meta.RESTScopeNameRoot {
		t.Errorf("scope %s, want root", got.Scope.Name())
	}
}
