package podset

import (
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The preview's differ: which fields of a template a running pod cannot
// take (RecreateFields), named as kubectl explain names them.

// RecreateFields names the fields of the pod template to that a running
// pod made from the template from cannot take: what is left different once
// the planner's templateDiff has taken from to every image, and every cpu
// and memory change a resize could make (takeInPlace). Paths read as kubectl explain's, with list items by name
// where they have one: spec.containers[app].env[DEBUG].
func RecreateFields(from, to *corev1.PodTemplateSpec) []string {
	patched := takeInPlace(&from.Spec, &to.Spec)
	var a, b any
	if Convert(patched, &a) != nil || Convert(&to.Spec, &b) != nil {
		return []string{"spec"}
	}
	var out []string
	diffPaths("spec", a, b, &out)
	return out
}

// diffPaths appends the paths at which a and b differ: into objects by
// field, into lists whose items all have a name by name, no further
// elsewhere.
func diffPaths(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffPaths(path+"."+k, am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		an, aNamed := byName(al)
		bn, bNamed := byName(bl)
		if aNamed && bNamed {
			var names []string
			for _, item := range al {
				names = append(names, itemName(item))
			}
			for _, item := range bl {
				if _, ok := an[itemName(item)]; !ok {
					names = append(names, itemName(item))
				}
			}
			for _, n := range names {
				diffPaths(path+"["+n+"]", an[n], bn[n], out)
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, path)
	}
}

// byName indexes list items that are objects with a unique name; false
// when any is not.
func byName(list []any) (map[string]any, bool) {
	out := map[string]any{}
	for _, item := range list {
		n := itemName(item)
		if n == "" {
			return nil, false
		}
		if _, dup := out[n]; dup {
			return nil, false
		}
		out[n] = item
	}
	return out, true
}

// itemName is the name of a list item that is an object with a string
// name, or "".
func itemName(item any) string {
	m, ok := item.(map[string]any)
	if !ok {
		return ""
	}
	n, _ := m["name"].(string)
	return strings.TrimSpace(n)
}
