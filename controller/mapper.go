package controller

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// newMapper is the manager's REST mapper: controller-runtime's dynamic
// one, with the mappings it found for a kind at one version remembered
// (rememberingMapper).
func newMapper(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &rememberingMapper{RESTMapper: m}, nil
}

// rememberingMapper remembers each mapping it found of a kind at one
// version. controller-runtime asks its mapper for one on every read of a
// namespaced cache (whether the object is namespaced), on every write
// through its client and on every event its owner handler maps: the
// dynamic mapper then walks the mappers of every API group the API server
// serves, about 0.1 ms each time, which was 6% of the operator's CPU
// creating 1000 PodSets of one pod (docs/benchmarks.md). A kind's
// mapping at a version it is served at does not change while it is
// served; a kind not found is not remembered, so a CRD installed later is
// still found (the dynamic mapper reloads its discovery then), and a
// mapping asked at no or several versions (the preferred one, which an
// upgrade of a CRD may change) is looked up every time.
type rememberingMapper struct {
	meta.RESTMapper
	found sync.Map // schema.GroupVersionKind -> meta.RESTMapping
}

// RESTMapping is the mapping of gk at versions.
func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	gvk := gk.WithVersion(versions[0])
	if v, ok := m.found.Load(gvk); ok {
		mapping := v.(meta.RESTMapping)
		return &mapping, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.found.Store(gvk, *mapping)
	return mapping, nil
}
