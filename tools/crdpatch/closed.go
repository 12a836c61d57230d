package main

import (
	"fmt"
	"slices"
	"strings"
)

// Unknown fields. The API server prunes a field the schema does not define and, unless the
// client asked for strict field validation (kubectl does; controller-runtime, client-go and most
// tools do not), only warns: a NodePool with Karpenter's newer spec.replicas would be stored
// without it, accepted and ignored. So every object a user writes under spec keeps its unknown
// fields (x-kubernetes-preserve-unknown-fields) and has a rule that refuses them.
//
// CEL cannot name an unknown field: the API server exposes an object's declared fields only, and
// its size. The rule compares the two, and its message lists the fields the object has. The
// fields of Karpenter's API that Fleetwright does not implement (karpenterOnly) are declared
// and each refused by name, with why.

// closedFiles are the CRDs of Karpenter's v1 API whose spec objects are closed.
var closedFiles = []string{"karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml"}

// refusal is a field of Karpenter's API that Fleetwright's does not have: declared in the
// schema of the object at path (dot-separated from the root; "[]" steps into a list's items),
// with a rule refusing it by name.
type refusal struct {
	file, path, field string
	schema            map[string]any
	why               string
}

func objectSchema() map[string]any {
	return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
}

func listSchema() map[string]any {
	return map[string]any{"type": "array", "items": objectSchema()}
}

func integerSchema() map[string]any { return map[string]any{"type": "integer"} }

// karpenterOnly are the spec fields of Karpenter v1.14's NodePool and EC2NodeClass that
// Fleetwright does not implement.
var karpenterOnly = []refusal{
	{"karpenter.sh_nodepools.yaml", "spec", "replicas", integerSchema(),
		"static capacity (a NodePool of a fixed number of nodes) is not supported by Fleetwright"},
	{"karpenter.k8s.aws_ec2nodeclasses.yaml", "spec", "networkInterfaces", listSchema(),
		"network interfaces (EFA) are not supported by Fleetwright"},
	{"karpenter.k8s.aws_ec2nodeclasses.yaml", "spec", "capacityReservationSelectorTerms", listSchema(),
		"capacity reservations are not supported by Fleetwright"},
	{"karpenter.k8s.aws_ec2nodeclasses.yaml", "spec", "placementGroupSelector", objectSchema(),
		"placement groups are not supported by Fleetwright"},
	{"karpenter.k8s.aws_ec2nodeclasses.yaml", "spec", "cpuOptions", objectSchema(),
		"CPU options (nested virtualization) are not supported by Fleetwright"},
	{"karpenter.k8s.aws_ec2nodeclasses.yaml", "spec", "connectionTracking", objectSchema(),
		"connection tracking timeouts are not supported by Fleetwright"},
	{"karpenter.k8s.aws_ec2nodeclasses.yaml", "spec", "ipPrefixCount", integerSchema(),
		"IP prefix delegation counts are not supported by Fleetwright"},
	{"karpenter.k8s.aws_ec2nodeclasses.yaml", "spec.blockDeviceMappings[].ebs", "volumeInitializationRate", integerSchema(),
		"EBS volume initialization rates are not supported by Fleetwright"},
}

// closeCRD declares and refuses the file's karpenterOnly fields, then closes every object under
// spec; files not in closedFiles are left as they are.
func closeCRD(file string, root map[string]any) error {
	if !slices.Contains(closedFiles, file) {
		return nil
	}
	for _, r := range karpenterOnly {
		if r.file != file {
			continue
		}
		obj, ok := at(root, r.path).(map[string]any)
		props, _ := dig(obj, "properties").(map[string]any)
		if !ok || props == nil {
			return fmt.Errorf("%s: %s is not an object", file, r.path)
		}
		if _, dup := props[r.field]; dup {
			return fmt.Errorf("%s: %s.%s is in the schema now: take it out of karpenterOnly", file, r.path, r.field)
		}
		s := r.schema
		s["description"] = "Karpenter's " + r.field + ": refused, " + r.why + "."
		props[r.field] = s
		addRule(obj, "!has(self."+celName(r.field)+")",
			fmt.Sprintf("%s.%s: %s", display(r.path), r.field, r.why))
	}
	spec, ok := dig(root, "properties", "spec").(map[string]any)
	if !ok {
		return fmt.Errorf("%s: no spec", file)
	}
	return closeObjects(spec, "spec")
}

// closeObjects closes node and every object below it: lists' items and maps' values are
// walked, objects of declared properties closed.
func closeObjects(node map[string]any, path string) error {
	if items, ok := node["items"].(map[string]any); ok {
		if err := closeObjects(items, path+"[]"); err != nil {
			return err
		}
	}
	if values, ok := node["additionalProperties"].(map[string]any); ok {
		if err := closeObjects(values, path+"{}"); err != nil {
			return err
		}
	}
	props, ok := node["properties"].(map[string]any)
	if !ok || node["type"] != "object" {
		return nil
	}
	if node["x-kubernetes-preserve-unknown-fields"] == true {
		return fmt.Errorf("%s keeps unknown fields already: nothing would refuse them", path)
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	counts := make([]string, len(names))
	for i, name := range names {
		counts[i] = "(has(self." + celName(name) + ") ? 1 : 0)"
		if err := closeObjects(props[name].(map[string]any), path+"."+name); err != nil {
			return err
		}
	}
	node["x-kubernetes-preserve-unknown-fields"] = true
	addRule(node, "size(dyn(self)) == "+strings.Join(counts, " + "),
		fmt.Sprintf("%s: a field Fleetwright's API does not define was given; it is refused, not dropped (the fields of %s: %s)",
			display(path), display(path), strings.Join(names, ", ")))
	return nil
}

func addRule(node map[string]any, rule, message string) {
	rules, _ := node["x-kubernetes-validations"].([]any)
	node["x-kubernetes-validations"] = append(rules, map[string]any{"rule": rule, "message": message})
}

// at is the schema at a dot-separated path whose "[]" steps into list items.
func at(root map[string]any, path string) any {
	var node any = root
	for _, step := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(step, "[]")
		node = dig(node, "properties", name)
		if list {
			node = dig(node, "items")
		}
	}
	return node
}

// display writes a path as users read it: spec.blockDeviceMappings[*].ebs.
func display(path string) string {
	return strings.NewReplacer("[]", "[*]", "{}", "[*]").Replace(path)
}

// celReserved are CEL's reserved words, which a field name must be escaped from.
var celReserved = []string{"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
	"function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}

// celName is a field name as a CEL rule must write it.
func celName(name string) string {
	if slices.Contains(celReserved, name) {
		return "__" + name + "__"
	}
	return strings.NewReplacer("__", "__underscores__", ".", "__dot__", "-", "__dash__", "/", "__slash__").Replace(name)
}
