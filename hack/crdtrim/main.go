// Command crdtrim drops the descriptions inside a CRD's embedded pod template.
//
// The PodSet CRD embeds the whole core/v1 PodTemplateSpec schema; with its
// descriptions the CRD is over 600 KB, more than client-side `kubectl apply`
// (and Argo CD's default sync) can store in the last-applied annotation
// (256 KiB). The pod fields are documented by `kubectl explain pod`, so only
// their descriptions go; PodSet's own fields keep theirs.
//
// Usage: crdtrim FILE PATH, where PATH is the dotted property path under
// spec (for example "spec.template"). It rewrites FILE in place.
package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: crdtrim FILE PATH")
		os.Exit(2)
	}
	if err := trim(os.Args[1], strings.Split(os.Args[2], ".")); err != nil {
		fmt.Fprintln(os.Stderr, "crdtrim:", err)
		os.Exit(1)
	}
}

func trim(file string, path []string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	versions, _ := lookup(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("%s: no spec.versions", file)
	}
	for _, v := range versions {
		node := lookup(v, "schema", "openAPIV3Schema")
		for _, p := range path {
			node = lookup(node, "properties", p)
		}
		schema, ok := node.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: no property %s", file, strings.Join(path, "."))
		}
		props, _ := schema["properties"].(map[string]any)
		for _, p := range props {
			dropDescriptions(p)
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(file, append([]byte("---\n"), out...), 0o644)
}

// lookup walks nested maps by key; it returns nil where a key is missing.
func lookup(node any, keys ...string) any {
	for _, k := range keys {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[k]
	}
	return node
}

// dropDescriptions removes every "description" key below node.
func dropDescriptions(node any) {
	switch n := node.(type) {
	case map[string]any:
		delete(n, "description")
		for _, v := range n {
			dropDescriptions(v)
		}
	case []any:
		for _, v := range n {
			dropDescriptions(v)
		}
	}
}
