// Command crdpatch does to the generated CRDs what controller-gen's markers cannot. It bounds
// the lengths of the strings markers cannot reach: the fields of corev1.Taint (a type of another
// module) in every taints and startupTaints list, and the values of the label maps. And it
// closes the v1 kinds' spec objects, so a field Fleetwright's API does not define is refused at
// admission whatever the client's field validation, rather than pruned with a warning (closed.go). The rules themselves (qualified-name
// keys, label-value syntax, known effects) are CEL rules written as markers beside the fields
// in pkg/apis; the apiserver refuses a CRD whose rules it estimates too costly, and without
// these bounds it estimates every string a few megabytes long. Karpenter patches its CRDs the
// same way (hack/validation/*.sh).
//
//	crdpatch DIR    patch DIR's CRDs in place (make crds, make crds-check)
//
// A path that is not in the schema is an error, so a renamed field cannot silently go unbounded.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// The longest label or taint key (a DNS subdomain of 253, '/', a name of 63) and value.
const (
	maxKeyLength    = 317
	maxValueLength  = 63
	maxEffectLength = 16
)

// patch says which schema nodes of one CRD file to bound.
type patch struct {
	file   string
	taints []string // paths (dot-separated, from the object's root) of []corev1.Taint
	labels []string // paths of map[string]string label maps
}

var patches = []patch{
	{file: "karpenter.sh_nodepools.yaml",
		taints: []string{"spec.template.spec.taints", "spec.template.spec.startupTaints"},
		labels: []string{"spec.template.metadata.labels"}},
	{file: "karpenter.sh_nodeclaims.yaml",
		taints: []string{"spec.taints", "spec.startupTaints"}},
	{file: "karpenter.sh_provisioners.yaml",
		taints: []string{"spec.taints", "spec.startupTaints"},
		labels: []string{"spec.labels"}},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch DIR")
		os.Exit(2)
	}
	files := slices.Clone(closedFiles)
	for _, p := range patches {
		if !slices.Contains(files, p.file) {
			files = append(files, p.file)
		}
	}
	for _, f := range files {
		p := patch{file: f}
		if i := slices.IndexFunc(patches, func(p patch) bool { return p.file == f }); i >= 0 {
			p = patches[i]
		}
		if err := apply(filepath.Join(os.Args[1], f), p); err != nil {
			fmt.Fprintln(os.Stderr, "crdpatch:", err)
			os.Exit(1)
		}
	}
}

func apply(file string, p patch) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("%s: no versions", file)
	}
	for _, v := range versions {
		root, ok := dig(v, "schema", "openAPIV3Schema").(map[string]any)
		if !ok {
			return fmt.Errorf("%s: no openAPIV3Schema", file)
		}
		for _, path := range p.taints {
			items, ok := dig(property(root, path), "items", "properties").(map[string]any)
			if !ok {
				return fmt.Errorf("%s: %s is not a list of taints", file, path)
			}
			for field, max := range map[string]int{"key": maxKeyLength, "value": maxValueLength, "effect": maxEffectLength} {
				s, ok := items[field].(map[string]any)
				if !ok {
					return fmt.Errorf("%s: %s has no %s", file, path, field)
				}
				s["maxLength"] = max
			}
		}
		for _, path := range p.labels {
			values, ok := dig(property(root, path), "additionalProperties").(map[string]any)
			if !ok {
				return fmt.Errorf("%s: %s is not a map", file, path)
			}
			values["maxLength"] = maxValueLength
		}
		if err := closeCRD(p.file, root); err != nil {
			return err
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	// As controller-gen writes it.
	return os.WriteFile(file, append([]byte("---\n"), bytes.TrimPrefix(out, []byte("---\n"))...), 0o644)
}

// property returns the schema of the property at the dot-separated path, or nil.
func property(schema map[string]any, path string) any {
	var node any = schema
	for _, name := range strings.Split(path, ".") {
		node = dig(node, "properties", name)
	}
	return node
}

func dig(node any, keys ...string) any {
	for _, k := range keys {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[k]
	}
	return node
}
