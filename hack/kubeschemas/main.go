// Command kubeschemas writes JSON schemas for kubeconform, offline: one
// file per kind, named as kubeconform's schema location
// {{ .ResourceKind }}{{ .KindSuffix }}.json asks for, from Kubernetes'
// OpenAPI v2 document (api/openapi-spec/swagger.json of the
// k8s.io/kubernetes module that hack/controlplane builds from) and from
// CustomResourceDefinitions (the project's, and those of other projects
// that its optional manifests use). The schemas are strict: an object with
// properties takes no others, so a misspelt field fails.
//
//	go run ./hack/kubeschemas -swagger .../swagger.json -crds config/crd/bases,... -out DIR
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// definitionsFile holds every Kubernetes definition; each kind's file
// refers into it.
const definitionsFile = "_definitions.json"

// Definitions whose OpenAPI v2 type says less than what manifests hold.
var overrides = map[string]map[string]any{
	// A number or a string: 8443 or "metrics".
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": []any{"integer", "string"}},
	// YAML gives numbers for quantities such as cpu: 1.
	"io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": []any{"string", "number"}},
}

func main() {
	swagger := flag.String("swagger", "", "Kubernetes' OpenAPI v2 document (swagger.json)")
	crds := flag.String("crds", "", "comma-separated folders of CustomResourceDefinition manifests")
	out := flag.String("out", "", "folder to write the schemas to")
	flag.Parse()
	if *swagger == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "kubeschemas: -swagger and -out are required")
		os.Exit(2)
	}
	if err := run(*swagger, *crds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "kubeschemas:", err)
		os.Exit(1)
	}
}

func run(swaggerPath, crdDirs, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	n, err := writeKubernetes(swaggerPath, out)
	if err != nil {
		return err
	}
	for dir := range strings.SplitSeq(crdDirs, ",") {
		if dir == "" {
			continue
		}
		m, err := writeCRDs(dir, out)
		if err != nil {
			return err
		}
		n += m
	}
	fmt.Printf("kubeschemas: %d kinds in %s\n", n, out)
	return nil
}

// writeKubernetes writes the definitions file and a file per kind of the
// OpenAPI v2 document.
func writeKubernetes(swaggerPath, out string) (int, error) {
	raw, err := os.ReadFile(swaggerPath)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", swaggerPath, err)
	}
	defs := map[string]any{}
	n := 0
	for name, def := range doc.Definitions {
		if o, ok := overrides[name]; ok {
			def = o
		}
		strict(def)
		rewriteRefs(def)
		defs[name] = def
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(map[string]any)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			kind, _ := gvk["kind"].(string)
			schema := map[string]any{"$ref": definitionsFile + "#/definitions/" + name}
			if err := writeJSON(filepath.Join(out, fileName(group, version, kind)), schema); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, writeJSON(filepath.Join(out, definitionsFile), map[string]any{"definitions": defs})
}

// writeCRDs writes a file per served version of each CRD in dir.
func writeCRDs(dir, out string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, errors.New(dir + " has no CRD")
	}
	n := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return 0, err
		}
		var crd struct {
			Kind string `json:"kind"`
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Served bool   `json:"served"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return 0, fmt.Errorf("%s: %w", file, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return 0, fmt.Errorf("%s is a %s, not a CustomResourceDefinition", file, crd.Kind)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			schema := v.Schema.OpenAPIV3Schema
			strict(schema)
			if err := writeJSON(filepath.Join(out, fileName(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)), schema); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}

// fileName is kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}.json: the
// kind, the first part of the group, and the version, in lower case.
func fileName(group, version, kind string) string {
	suffix := ""
	if group != "" {
		suffix = "-" + strings.Split(group, ".")[0]
	}
	return strings.ToLower(kind + suffix + "-" + version + ".json")
}

// strict closes every object schema with properties to other properties,
// and gives x-kubernetes-int-or-string its types, throughout schema.
func strict(schema map[string]any) {
	if schema["x-kubernetes-int-or-string"] == true {
		schema["type"] = []any{"integer", "string"}
	}
	_, hasProperties := schema["properties"]
	_, hasAdditional := schema["additionalProperties"]
	if hasProperties && !hasAdditional && schema["x-kubernetes-preserve-unknown-fields"] != true {
		schema["additionalProperties"] = false
	}
	for _, key := range []string{"properties", "patternProperties", "definitions"} {
		if m, ok := schema[key].(map[string]any); ok {
			for _, sub := range m {
				if s, ok := sub.(map[string]any); ok {
					strict(s)
				}
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties", "not"} {
		if s, ok := schema[key].(map[string]any); ok {
			strict(s)
		}
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		if list, ok := schema[key].([]any); ok {
			for _, sub := range list {
				if s, ok := sub.(map[string]any); ok {
					strict(s)
				}
			}
		}
	}
}

// rewriteRefs points OpenAPI v2's #/definitions/X references into the
// definitions file.
func rewriteRefs(v any) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, "#/definitions/") {
			v["$ref"] = definitionsFile + ref
		}
		for _, sub := range v {
			rewriteRefs(sub)
		}
	case []any:
		for _, sub := range v {
			rewriteRefs(sub)
		}
	}
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
