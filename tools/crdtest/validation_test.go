package crdtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Valid objects of each kind, which the cases below break one way each.
func nodePool() map[string]any {
	return obj(`{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"validation"},"spec":{
		"template":{"metadata":{"labels":{"team":"a"}},"spec":{
			"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},
			"requirements":[{"key":"karpenter.k8s.aws/instance-family","operator":"In","values":["m5","c5"]}],
			"expireAfter":"720h"}},
		"disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":"30s"},
		"limits":{"cpu":"100"},"weight":10}}`)
}

func nodeClaim() map[string]any {
	return obj(`{"apiVersion":"karpenter.sh/v1","kind":"NodeClaim","metadata":{"name":"validation"},"spec":{
		"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},
		"requirements":[{"key":"node.kubernetes.io/instance-type","operator":"In","values":["m5.large"]}],
		"resources":{"requests":{"cpu":"1"}}}}`)
}

func ec2NodeClass() map[string]any {
	return obj(`{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":"validation"},"spec":{
		"amiSelectorTerms":[{"alias":"al2023@latest"}],
		"subnetSelectorTerms":[{"tags":{"karpenter.sh/discovery":"demo"}}],
		"securityGroupSelectorTerms":[{"tags":{"karpenter.sh/discovery":"demo"}}],
		"role":"KarpenterNodeRole"}}`)
}

func provisionerObj() map[string]any {
	return obj(`{"apiVersion":"karpenter.sh/v1alpha5","kind":"Provisioner","metadata":{"name":"validation"},"spec":{
		"requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}],
		"providerRef":{"name":"default"},"ttlSecondsAfterEmpty":30}}`)
}

func awsNodeTemplate() map[string]any {
	return obj(`{"apiVersion":"karpenter.k8s.aws/v1alpha1","kind":"AWSNodeTemplate","metadata":{"name":"validation"},"spec":{
		"subnetSelector":{"karpenter.sh/discovery":"demo"},"securityGroupSelector":{"karpenter.sh/discovery":"demo"}}}`)
}

func obj(s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		panic(err)
	}
	return m
}

// set changes one field of an object (path dot-separated, value as JSON).
func set(path, value string) func(map[string]any) {
	return func(m map[string]any) {
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			panic(err)
		}
		if err := unstructured.SetNestedField(m, v, strings.Split(path, ".")...); err != nil {
			panic(err)
		}
	}
}

func unset(path string) func(map[string]any) {
	return func(m map[string]any) { unstructured.RemoveNestedField(m, strings.Split(path, ".")...) }
}

// dryRun applies the object with kubectl (server-side dry run), returning its output.
func (e *env) dryRun(t *testing.T, m map[string]any, args ...string) (string, string, error) {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return e.kubectl(t, string(b), append([]string{"apply", "--dry-run=server", "-f", "-"}, args...)...)
}

type schemaCase struct {
	name   string
	base   func() map[string]any
	change func(map[string]any)
	want   string // in the error; "" means the change is valid
}

var schemaCases = []schemaCase{
	// NodePool
	{"nodepool: valid base", nodePool, func(map[string]any) {}, ""},
	{"nodepool: operator Gte", nodePool, set("spec.template.spec.requirements", `[{"key":"karpenter.k8s.aws/instance-cpu","operator":"Gte","values":["4"]}]`), ""},
	{"nodepool: minValues met", nodePool, set("spec.template.spec.requirements", `[{"key":"karpenter.k8s.aws/instance-family","operator":"In","values":["m5","c5"],"minValues":2}]`), ""},
	{"nodepool: Never", nodePool, set("spec.template.spec.expireAfter", `"Never"`), ""},
	{"nodepool: the default budget written out", nodePool, set("spec.disruption.budgets", `[{"nodes":"10%"}]`), ""},
	// Budgets are not enforced yet: any but the default is refused rather than accepted and ignored.
	{"nodepool: scheduled budget", nodePool, set("spec.disruption.budgets", `[{"nodes":"0","schedule":"@daily","duration":"10m","reasons":["Drifted"]}]`), ""},
	{"nodepool: budget of no nodes", nodePool, set("spec.disruption.budgets", `[{"nodes":"0"}]`), ""},
	{"nodepool: several budgets", nodePool, set("spec.disruption.budgets", `[{"nodes":"20%"},{"nodes":"0","schedule":"0 9 * * 1-5","duration":"8h"},{"nodes":"5","reasons":["Empty","Underutilized"]}]`), ""},
	{"nodepool: duration without schedule", nodePool, set("spec.disruption.budgets", `[{"nodes":"0","duration":"1h"}]`), "'schedule' must be set with 'duration'"},
	{"nodepool: budget for an unknown reason", nodePool, set("spec.disruption.budgets", `[{"nodes":"1","reasons":["Expired"]}]`), `Unsupported value: "Expired"`},
	{"nodepool: budget schedule of four fields", nodePool, set("spec.disruption.budgets", `[{"nodes":"1","schedule":"0 9 * *","duration":"1h"}]`), "schedule in body should match"},
	{"nodepool: unknown operator", nodePool, set("spec.template.spec.requirements", `[{"key":"kubernetes.io/arch","operator":"Equals","values":["arm64"]}]`), `Unsupported value: "Equals"`},
	{"nodepool: weight 0", nodePool, set("spec.weight", `0`), "should be greater than or equal to 1"},
	{"nodepool: weight 101", nodePool, set("spec.weight", `101`), "should be less than or equal to 100"},
	{"nodepool: expireAfter in days", nodePool, set("spec.template.spec.expireAfter", `"30d"`), "expireAfter in body should match"},
	{"nodepool: consolidateAfter not a duration", nodePool, set("spec.disruption.consolidateAfter", `"soon"`), "consolidateAfter in body should match"},
	{"nodepool: terminationGracePeriod in words", nodePool, set("spec.template.spec.terminationGracePeriod", `"10 minutes"`), "terminationGracePeriod in body should match"},
	{"nodepool: v1beta1 policy", nodePool, set("spec.disruption.consolidationPolicy", `"WhenUnderutilized"`), `Unsupported value: "WhenUnderutilized"`},
	{"nodepool: In without values", nodePool, set("spec.template.spec.requirements", `[{"key":"kubernetes.io/arch","operator":"In"}]`), "requirements operator 'In' must have a value defined"},
	{"nodepool: Gt not a number", nodePool, set("spec.template.spec.requirements", `[{"key":"karpenter.k8s.aws/instance-cpu","operator":"Gt","values":["abc"]}]`), "must have a single non-negative integer value"},
	{"nodepool: minValues above values", nodePool, set("spec.template.spec.requirements", `[{"key":"karpenter.k8s.aws/instance-family","operator":"In","values":["m5","c5"],"minValues":3}]`), "must have at least that many values"},
	{"nodepool: hostname requirement", nodePool, set("spec.template.spec.requirements", `[{"key":"kubernetes.io/hostname","operator":"In","values":["a"]}]`), `label domain "kubernetes.io" is restricted`},
	{"nodepool: nodepool label", nodePool, set("spec.template.metadata.labels", `{"karpenter.sh/nodepool":"x"}`), `label "karpenter.sh/nodepool" is restricted`},
	{"nodepool: misspelt nodeClassRef kind", nodePool, set("spec.template.spec.nodeClassRef.kind", `"EC2Nodeclass"`), "nodeClassRef must refer to an EC2NodeClass"},
	{"nodepool: no nodeClassRef", nodePool, unset("spec.template.spec.nodeClassRef"), "spec.template.spec.nodeClassRef: Required value"},
	{"nodepool: schedule without duration", nodePool, set("spec.disruption.budgets", `[{"nodes":"0","schedule":"@daily"}]`), "'schedule' must be set with 'duration'"},
	{"nodepool: budget over 100%", nodePool, set("spec.disruption.budgets", `[{"nodes":"110%"}]`), "nodes in body should match"},
	{"nodepool: limit not a quantity", nodePool, set("spec.limits", `{"cpu":"lots"}`), "limits.cpu"},
	// Labels and taints reach the kubelet's --node-labels and --register-with-taints: anything
	// but one valid token would add kubelet flags or user-data lines, or keep every node from
	// joining.
	{"nodepool: valid labels and taints", nodePool, func(m map[string]any) {
		set("spec.template.metadata.labels", `{"team":"a","example.com/Tier_1.x":"Gold-2_b.c","empty":"","node.kubernetes.io/instance-type":"m5.large"}`)(m)
		set("spec.template.spec.taints", `[{"key":"example.com/dedicated","value":"gpu_A.1","effect":"NoSchedule"},{"key":"spot","effect":"PreferNoSchedule"}]`)(m)
		set("spec.template.spec.startupTaints", `[{"key":"node.cilium.io/agent-not-ready","value":"true","effect":"NoExecute"}]`)(m)
	}, ""},
	{"nodepool: label value with a space", nodePool, set("spec.template.metadata.labels", `{"team":"a --register-with-taints=x:NoSchedule"}`), "label values must be"},
	{"nodepool: label value with a newline", nodePool, set("spec.template.metadata.labels", `{"team":"a\nrm -rf /"}`), "label values must be"},
	{"nodepool: label value too long", nodePool, set("spec.template.metadata.labels", `{"team":"`+strings.Repeat("a", 64)+`"}`), "spec.template.metadata.labels.team: Too long: may not be more than 63 bytes"},
	{"nodepool: label key with a bad prefix", nodePool, set("spec.template.metadata.labels", `{"Example_Com/team":"a"}`), "label keys must be"},
	{"nodepool: label key with a space", nodePool, set("spec.template.metadata.labels", `{"team a":"b"}`), "label keys must be"},
	{"nodepool: label key name too long", nodePool, set("spec.template.metadata.labels", `{"example.com/`+strings.Repeat("a", 64)+`":"b"}`), "label keys must be"},
	{"nodepool: taint value with a newline", nodePool, set("spec.template.spec.taints", `[{"key":"dedicated","value":"gpu\n--v=10","effect":"NoSchedule"}]`), "taint values must be"},
	{"nodepool: taint value with a comma", nodePool, set("spec.template.spec.taints", `[{"key":"dedicated","value":"gpu,x=y:NoExecute","effect":"NoSchedule"}]`), "taint values must be"},
	{"nodepool: taint key with a space", nodePool, set("spec.template.spec.taints", `[{"key":"dedi cated","effect":"NoSchedule"}]`), "taint keys must be"},
	{"nodepool: empty taint key", nodePool, set("spec.template.spec.taints", `[{"key":"","effect":"NoSchedule"}]`), "taint keys must be"},
	{"nodepool: misspelt taint effect", nodePool, set("spec.template.spec.taints", `[{"key":"dedicated","effect":"NoSchedul"}]`), "taint effect must be NoSchedule, PreferNoSchedule or NoExecute"},
	{"nodepool: misspelt startup taint effect", nodePool, set("spec.template.spec.startupTaints", `[{"key":"dedicated","effect":"noschedule"}]`), "taint effect must be NoSchedule, PreferNoSchedule or NoExecute"},
	{"nodepool: startup taint key with a newline", nodePool, set("spec.template.spec.startupTaints", `[{"key":"a\nb","effect":"NoSchedule"}]`), "taint keys must be"},
	// NodeClaim
	{"nodeclaim: valid base", nodeClaim, func(map[string]any) {}, ""},
	{"nodeclaim: Lte with two values", nodeClaim, set("spec.requirements", `[{"key":"karpenter.k8s.aws/instance-cpu","operator":"Lte","values":["4","8"]}]`), "must have a single non-negative integer value"},
	{"nodeclaim: Exists with values", nodeClaim, set("spec.requirements", `[{"key":"karpenter.k8s.aws/instance-gpu-count","operator":"Exists","values":["1"]}]`), "must have no values"},
	{"nodeclaim: valid taints", nodeClaim, set("spec.taints", `[{"key":"example.com/dedicated","value":"gpu","effect":"NoExecute"}]`), ""},
	{"nodeclaim: taint value with a space", nodeClaim, set("spec.taints", `[{"key":"dedicated","value":"gpu --v=10","effect":"NoSchedule"}]`), "taint values must be"},
	{"nodeclaim: misspelt taint effect", nodeClaim, set("spec.taints", `[{"key":"dedicated","effect":"NoSchedul"}]`), "taint effect must be NoSchedule, PreferNoSchedule or NoExecute"},
	{"nodeclaim: startup taint key with a bad prefix", nodeClaim, set("spec.startupTaints", `[{"key":"-bad.com/x","effect":"NoSchedule"}]`), "taint keys must be"},
	// EC2NodeClass
	{"ec2nodeclass: valid base", ec2NodeClass, func(map[string]any) {}, ""},
	{"ec2nodeclass: pinned bottlerocket alias", ec2NodeClass, set("spec.amiSelectorTerms", `[{"alias":"bottlerocket@v1.20.0"}]`), ""},
	{"ec2nodeclass: AMIs by id with a family", ec2NodeClass, func(m map[string]any) {
		set("spec.amiSelectorTerms", `[{"id":"ami-0123"},{"name":"my-ami-*","owner":"self"}]`)(m)
		set("spec.amiFamily", `"AL2"`)(m)
	}, ""},
	{"ec2nodeclass: role and instanceProfile", ec2NodeClass, set("spec.instanceProfile", `"profile"`), "must specify exactly one of ['role', 'instanceProfile']"},
	{"ec2nodeclass: neither role nor instanceProfile", ec2NodeClass, unset("spec.role"), "must specify exactly one of ['role', 'instanceProfile']"},
	{"ec2nodeclass: AMIs by id without a family", ec2NodeClass, set("spec.amiSelectorTerms", `[{"id":"ami-0123"}]`), "must specify amiFamily if amiSelectorTerms does not contain an alias"},
	{"ec2nodeclass: alias with another term", ec2NodeClass, set("spec.amiSelectorTerms", `[{"alias":"al2023@latest"},{"id":"ami-0123"}]`), "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
	{"ec2nodeclass: AMI by SSM parameter", ec2NodeClass, func(m map[string]any) {
		set("spec.amiSelectorTerms", `[{"ssmParameter":"/team/ami"},{"id":"ami-0123"}]`)(m)
		set("spec.amiFamily", `"AL2023"`)(m)
	}, ""},
	{"ec2nodeclass: SSM parameter with tags", ec2NodeClass, func(m map[string]any) {
		set("spec.amiSelectorTerms", `[{"ssmParameter":"/team/ami","tags":{"a":"b"}}]`)(m)
		set("spec.amiFamily", `"AL2023"`)(m)
	}, "'ssmParameter' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
	{"ec2nodeclass: id with SSM parameter", ec2NodeClass, func(m map[string]any) {
		set("spec.amiSelectorTerms", `[{"id":"ami-0123","ssmParameter":"/team/ami"}]`)(m)
		set("spec.amiFamily", `"AL2023"`)(m)
	}, "'id' is mutually exclusive"},
	{"ec2nodeclass: alias with SSM parameter", ec2NodeClass, set("spec.amiSelectorTerms", `[{"alias":"al2023@latest","ssmParameter":"/team/ami"}]`),
		"'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
	{"ec2nodeclass: unknown alias family", ec2NodeClass, set("spec.amiSelectorTerms", `[{"alias":"ubuntu@latest"}]`), "family is not supported"},
	{"ec2nodeclass: empty subnet term", ec2NodeClass, set("spec.subnetSelectorTerms", `[{}]`), "expected at least one, got none, ['tags', 'id']"},
	{"ec2nodeclass: no subnet terms", ec2NodeClass, set("spec.subnetSelectorTerms", `[]`), "should have at least 1 items"},
	{"ec2nodeclass: subnet id and tags", ec2NodeClass, set("spec.subnetSelectorTerms", `[{"id":"subnet-1","tags":{"a":"b"}}]`), "'id' is mutually exclusive"},
	{"ec2nodeclass: empty tag value", ec2NodeClass, set("spec.securityGroupSelectorTerms", `[{"tags":{"a":""}}]`), "empty tag keys or values aren't supported"},
	{"ec2nodeclass: cluster tag", ec2NodeClass, set("spec.tags", `{"kubernetes.io/cluster/demo":"owned"}`), "restricted tag matching kubernetes.io/cluster/"},
	{"ec2nodeclass: Windows family", ec2NodeClass, func(m map[string]any) {
		set("spec.amiSelectorTerms", `[{"id":"ami-0123"}]`)(m)
		set("spec.amiFamily", `"Windows2022"`)(m)
	}, "Fleetwright does not launch Windows nodes"},
	{"ec2nodeclass: Windows alias", ec2NodeClass, set("spec.amiSelectorTerms", `[{"alias":"windows2019@latest"}]`), "Fleetwright does not launch Windows nodes"},
	{"ec2nodeclass: Custom family", ec2NodeClass, func(m map[string]any) {
		set("spec.amiSelectorTerms", `[{"id":"ami-0123"}]`)(m)
		set("spec.amiFamily", `"Custom"`)(m)
		set("spec.userData", `"#!/bin/bash\n/etc/eks/bootstrap.sh demo"`)(m)
	}, ""},
	{"ec2nodeclass: podsPerCore on AL2023", ec2NodeClass, set("spec.kubelet", `{"podsPerCore":4}`), ""},
	{"ec2nodeclass: podsPerCore on Bottlerocket", ec2NodeClass, func(m map[string]any) {
		set("spec.amiSelectorTerms", `[{"alias":"bottlerocket@latest"}]`)(m)
		set("spec.kubelet", `{"podsPerCore":4}`)(m)
	}, "kubelet.podsPerCore is not supported by the Bottlerocket AMI family"},
	{"ec2nodeclass: Ubuntu family", ec2NodeClass, set("spec.amiFamily", `"Ubuntu"`), `Unsupported value: "Ubuntu"`},
	{"ec2nodeclass: hop limit 65", ec2NodeClass, set("spec.metadataOptions", `{"httpPutResponseHopLimit":65}`), "should be less than or equal to 64"},
	{"ec2nodeclass: two root volumes", ec2NodeClass, set("spec.blockDeviceMappings", `[{"deviceName":"/dev/xvda","rootVolume":true},{"deviceName":"/dev/xvdb","rootVolume":true}]`), "must have only one blockDeviceMappings with rootVolume"},
	{"ec2nodeclass: unknown kubelet reservation", ec2NodeClass, set("spec.kubelet", `{"systemReserved":{"gpu":"1"}}`), "valid keys for systemReserved"},
	// Issue 31, item 7: every kubelet map's keys are the kubelet's own (they reach AL2's
	// --kubelet-extra-args), Karpenter's signal names.
	{"ec2nodeclass: eviction maps with Karpenter's signals", ec2NodeClass, set("spec.kubelet", `{"evictionHard":{"memory.available":"5%"},"evictionSoft":{"nodefs.available":"10%"},"evictionSoftGracePeriod":{"nodefs.available":"1m"}}`), ""},
	{"ec2nodeclass: unknown soft grace period signal", ec2NodeClass, set("spec.kubelet", `{"evictionSoftGracePeriod":{"memory.available --v=9":"1m"}}`), "valid keys for evictionSoftGracePeriod"},
	{"ec2nodeclass: unknown hard eviction signal", ec2NodeClass, set("spec.kubelet", `{"evictionHard":{"gpu.available":"5%"}}`), "valid keys for evictionHard"},
	// Provisioner
	{"provisioner: valid base", provisionerObj, func(map[string]any) {}, ""},
	{"provisioner: inline provider kept", provisionerObj, func(m map[string]any) {
		unset("spec.providerRef")(m)
		set("spec.provider", `{"subnetSelector":{"a":"b"},"securityGroupSelector":{"a":"b"}}`)(m)
	}, ""},
	{"provisioner: containerd", provisionerObj, set("spec.kubeletConfiguration", `{"containerRuntime":"containerd"}`), ""},
	{"provisioner: dockerd", provisionerObj, set("spec.kubeletConfiguration", `{"containerRuntime":"dockerd"}`), "Fleetwright nodes run containerd"},
	{"provisioner: eviction maps with Karpenter's signals", provisionerObj, set("spec.kubeletConfiguration", `{"evictionHard":{"memory.available":"5%"},"evictionSoft":{"nodefs.available":"10%"},"evictionSoftGracePeriod":{"nodefs.available":"1m"},"systemReserved":{"cpu":"100m"}}`), ""},
	{"provisioner: unknown hard eviction signal", provisionerObj, set("spec.kubeletConfiguration", `{"evictionHard":{"memory.available --v=9":"5%"}}`), "valid keys for evictionHard"},
	{"provisioner: unknown soft eviction signal", provisionerObj, set("spec.kubeletConfiguration", `{"evictionSoft":{"gpu.available":"5%"}}`), "valid keys for evictionSoft"},
	{"provisioner: unknown soft grace period signal", provisionerObj, set("spec.kubeletConfiguration", `{"evictionSoftGracePeriod":{"x":"1m"}}`), "valid keys for evictionSoftGracePeriod"},
	{"provisioner: unknown reservation", provisionerObj, set("spec.kubeletConfiguration", `{"kubeReserved":{"gpu":"1"}}`), "valid keys for kubeReserved"},
	// AWSNodeTemplate
	{"awsnodetemplate: valid base", awsNodeTemplate, func(map[string]any) {}, ""},
	{"awsnodetemplate: own launch template", awsNodeTemplate, set("spec.launchTemplate", `"my-template"`), "launchTemplate is not supported"},
	{"provisioner: weight 0", provisionerObj, set("spec.weight", `0`), "should be greater than or equal to 1"},
	{"provisioner: emptiness ttl and consolidation", provisionerObj, set("spec.consolidation", `{"enabled":true}`), "ttlSecondsAfterEmpty and consolidation.enabled are mutually exclusive"},
	{"provisioner: valid labels and taints", provisionerObj, func(m map[string]any) {
		set("spec.labels", `{"team":"a","example.com/tier":""}`)(m)
		set("spec.taints", `[{"key":"example.com/dedicated","value":"gpu","effect":"NoSchedule"}]`)(m)
		set("spec.startupTaints", `[{"key":"agent-not-ready","effect":"NoExecute"}]`)(m)
	}, ""},
	{"provisioner: label value with a newline", provisionerObj, set("spec.labels", `{"team":"a\nb"}`), "label values must be"},
	{"provisioner: label key with a bad prefix", provisionerObj, set("spec.labels", `{"bad_prefix.com/team":"a"}`), "label keys must be"},
	{"provisioner: taint value with a space", provisionerObj, set("spec.taints", `[{"key":"dedicated","value":"a b","effect":"NoSchedule"}]`), "taint values must be"},
	{"provisioner: misspelt taint effect", provisionerObj, set("spec.taints", `[{"key":"dedicated","effect":"NoSchedul"}]`), "taint effect must be NoSchedule, PreferNoSchedule or NoExecute"},
	{"provisioner: startup taint key with a newline", provisionerObj, set("spec.startupTaints", `[{"key":"a\nb","effect":"NoSchedule"}]`), "taint keys must be"},
	{"provisioner: unknown operator", provisionerObj, set("spec.requirements", `[{"key":"a","operator":"Equals","values":["b"]}]`), `Unsupported value: "Equals"`},
}

// The schema accepts what Karpenter's accepts and rejects, with Karpenter's messages, what it
// rejects.
func TestSchemaValidation(t *testing.T) {
	e := cluster(t)
	for _, tc := range schemaCases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.base()
			tc.change(m)
			out, stderr, err := e.dryRun(t, m)
			if tc.want == "" {
				require.NoError(t, err, stderr)
				require.Contains(t, out, "(server dry run)")
				return
			}
			require.Error(t, err, "accepted: %s", out)
			require.Contains(t, stderr, tc.want)
		})
	}
}

// rename moves a field to another path (a misspelling).
func rename(from, to string) func(map[string]any) {
	return func(m map[string]any) {
		path := strings.Split(from, ".")
		v, _, _ := unstructured.NestedFieldCopy(m, path...)
		unstructured.RemoveNestedField(m, path...)
		if err := unstructured.SetNestedField(m, v, strings.Split(to, ".")...); err != nil {
			panic(err)
		}
	}
}

// A field the v1 kinds do not define is refused at admission, at every level users write,
// whatever the client's field validation: kubectl's default (Strict), --validate=false
// (Ignore), and a client that sends none, as controller-runtime's and client-go's (the server
// would prune the field and only warn). Karpenter's fields Fleetwright does not implement are
// refused by name, with why; any other, with the fields the object has.
func TestUnknownFieldsRefused(t *testing.T) {
	e := cluster(t)
	gvrs := map[string]schema.GroupVersionResource{"NodePool": gvrNodePool, "NodeClaim": gvrNodeClaim, "EC2NodeClass": gvrEC2NodeClass}
	unknown := func(path string) string {
		return path + ": a field Fleetwright's API does not define was given; it is refused, not dropped (the fields of " + path + ": "
	}
	cases := []struct {
		name   string
		base   func() map[string]any
		change func(map[string]any)
		want   string
	}{
		// Karpenter's newer fields, by name.
		{"nodepool replicas", nodePool, set("spec.replicas", `3`), "spec.replicas: static capacity (a NodePool of a fixed number of nodes) is not supported by Fleetwright"},
		{"ec2nodeclass networkInterfaces", ec2NodeClass, set("spec.networkInterfaces", `[{"networkCardIndex":0,"deviceIndex":0,"interfaceType":"efa"}]`), "spec.networkInterfaces: network interfaces (EFA) are not supported"},
		{"ec2nodeclass capacityReservationSelectorTerms", ec2NodeClass, set("spec.capacityReservationSelectorTerms", `[{"id":"cr-1"}]`), "spec.capacityReservationSelectorTerms: capacity reservations are not supported"},
		{"ec2nodeclass placementGroupSelector", ec2NodeClass, set("spec.placementGroupSelector", `{"name":"pg"}`), "spec.placementGroupSelector: placement groups are not supported"},
		{"ec2nodeclass cpuOptions", ec2NodeClass, set("spec.cpuOptions", `{"nestedVirtualization":"enabled"}`), "spec.cpuOptions: CPU options"},
		{"ec2nodeclass ebs volumeInitializationRate", ec2NodeClass, set("spec.blockDeviceMappings", `[{"deviceName":"/dev/xvda","ebs":{"volumeSize":"20Gi","volumeInitializationRate":200}}]`),
			"spec.blockDeviceMappings[*].ebs.volumeInitializationRate: EBS volume initialization rates are not supported"},
		// Anything else, at each level a user writes.
		{"nodepool spec", nodePool, set("spec.weigth", `10`), unknown("spec") + "disruption, limits, replicas, template, weight)"},
		{"nodepool template", nodePool, set("spec.template.labels", `{"a":"b"}`), unknown("spec.template") + "metadata, spec)"},
		{"nodepool template metadata", nodePool, set("spec.template.metadata.finalizers", `["x"]`), unknown("spec.template.metadata")},
		{"nodepool template spec", nodePool, rename("spec.template.spec.expireAfter", "spec.template.spec.expiresAfter"), unknown("spec.template.spec")},
		{"nodepool nodeClassRef", nodePool, set("spec.template.spec.nodeClassRef.namespace", `"default"`), unknown("spec.template.spec.nodeClassRef") + "group, kind, name)"},
		{"nodepool requirement", nodePool, set("spec.template.spec.requirements", `[{"key":"kubernetes.io/arch","operator":"In","values":["arm64"],"minvalues":1}]`), unknown("spec.template.spec.requirements[*]")},
		{"nodepool taint", nodePool, set("spec.template.spec.taints", `[{"key":"a","effect":"NoSchedule","operator":"Exists"}]`), unknown("spec.template.spec.taints[*]")},
		{"nodepool disruption", nodePool, rename("spec.disruption.consolidateAfter", "spec.disruption.consolidateAftr"), unknown("spec.disruption")},
		{"nodepool budget", nodePool, set("spec.disruption.budgets", `[{"nodes":"1","reason":["Empty"]}]`), unknown("spec.disruption.budgets[*]")},
		{"nodeclaim spec", nodeClaim, set("spec.kubelet", `{"maxPods":10}`), unknown("spec")},
		{"nodeclaim resources", nodeClaim, set("spec.resources.limits", `{"cpu":"1"}`), unknown("spec.resources")},
		{"ec2nodeclass spec", ec2NodeClass, set("spec.userdata", `"#!/bin/bash"`), unknown("spec")},
		// A misspelt required field is refused as missing (the rules wait for a valid object).
		{"ec2nodeclass spec, required", ec2NodeClass, rename("spec.subnetSelectorTerms", "spec.subnetSelectorTerm"), "spec.subnetSelectorTerms: Required value"},
		{"ec2nodeclass selector term", ec2NodeClass, set("spec.subnetSelectorTerms", `[{"tags":{"a":"b"},"name":"x"}]`), unknown("spec.subnetSelectorTerms[*]") + "id, tags)"},
		{"ec2nodeclass kubelet", ec2NodeClass, set("spec.kubelet", `{"maxpods":10}`), unknown("spec.kubelet")},
		{"ec2nodeclass block device", ec2NodeClass, set("spec.blockDeviceMappings", `[{"deviceName":"/dev/xvda","ebs":{"volumeSize":"20Gi","volumSize":"30Gi"}}]`), unknown("spec.blockDeviceMappings[*].ebs")},
		{"ec2nodeclass metadataOptions", ec2NodeClass, set("spec.metadataOptions", `{"httpTokenz":"required"}`), unknown("spec.metadataOptions")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.base()
			tc.change(m)
			for _, validate := range []string{"--validate=strict", "--validate=false"} {
				out, stderr, err := e.dryRun(t, m, validate)
				require.Error(t, err, "kubectl %s accepted: %s", validate, out)
				require.Contains(t, stderr, tc.want, validate)
			}
			u := &unstructured.Unstructured{Object: m}
			_, err := e.dynamic.Resource(gvrs[u.GetKind()]).Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			require.Error(t, err, "a client without field validation: accepted")
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// The v1alpha5 kinds are not closed: a misspelt field is refused under kubectl's default
// (strict) field validation, and reported as a warning under --validate=warn.
func TestMisspeltFields(t *testing.T) {
	e := cluster(t)
	m := provisionerObj()
	rename("spec.ttlSecondsAfterEmpty", "spec.ttlSecondsAfterEmty")(m)
	out, stderr, err := e.dryRun(t, m)
	require.Error(t, err, "strict validation accepted: %s", out)
	require.Contains(t, stderr, `unknown field "spec.ttlSecondsAfterEmty"`)

	out, stderr, err = e.dryRun(t, m, "--validate=warn")
	require.Contains(t, stderr, `Warning: unknown field "spec.ttlSecondsAfterEmty"`)
	require.NoError(t, err, stderr)
	require.Contains(t, out, "(server dry run)")
}
