package scheduling

import (
	"slices"
	"strings"
	"testing"
)

// topology.k8s.aws/zone-id is an offering label, as in Karpenter: a requirement on it (a pod's or
// a pool's) picks the zones with those ids (Input.ZoneIDs, from the node classes' subnets), and
// agrees or conflicts with one on topology.kubernetes.io/zone.
func TestZoneIDRequirements(t *testing.T) {
	ids := map[string]string{"z1": "use1-az1", "z2": "use1-az2", "z3": "use1-az4"}
	withReqs := func(reqs ...Requirement) func(*Pod) {
		return func(p *Pod) { p.RequiredNodeAffinity = []NodeSelectorTerm{{Requirements: reqs}} }
	}
	zoneID := func(op Operator, v ...string) Requirement {
		return Requirement{Key: LabelZoneID, Operator: op, Values: v}
	}
	zone := func(v ...string) Requirement { return Requirement{Key: LabelZone, Operator: OpIn, Values: v} }
	for _, tc := range []struct {
		name  string
		pool  []Requirement
		pod   func(*Pod)
		zones []string // the claim's; nil: unschedulable
		why   string
	}{
		{name: "In", pod: withReqs(zoneID(OpIn, "use1-az2")), zones: []string{"z2"}},
		{name: "NotIn", pod: withReqs(zoneID(OpNotIn, "use1-az1", "use1-az2")), zones: []string{"z3"}},
		{name: "the pool's", pool: []Requirement{zoneID(OpIn, "use1-az4")}, pod: func(*Pod) {}, zones: []string{"z3"}},
		{name: "zone and zone-id that agree", pod: withReqs(zone("z1", "z2"), zoneID(OpIn, "use1-az2", "use1-az4")), zones: []string{"z2"}},
		{name: "zone and zone-id that conflict", pod: withReqs(zone("z1"), zoneID(OpIn, "use1-az2")), why: "no zone and capacity type both allow"},
		{name: "an id no zone has", pod: withReqs(zoneID(OpIn, "use1-az9")), why: "no zone and capacity type both allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{NodePools: []NodePool{{Name: "default", Requirements: tc.pool}}, ZoneIDs: ids, Pods: []Pod{pod("a", tc.pod)}}
			plan := solve(t, in)
			if tc.zones == nil {
				if len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, tc.why) {
					t.Fatalf("want unschedulable (%s), got claims %+v, unschedulable %+v", tc.why, plan.NodeClaims, plan.Unschedulable)
				}
				return
			}
			if len(plan.NodeClaims) != 1 {
				t.Fatalf("claims %+v, unschedulable %+v", plan.NodeClaims, plan.Unschedulable)
			}
			c := plan.NodeClaims[0]
			if !slices.Equal(c.Zones, tc.zones) {
				t.Fatalf("zones %v, want %v", c.Zones, tc.zones)
			}
		})
	}
}

// The deprecated labels Kubernetes nodes still carry, and the EBS CSI driver's zone label, are
// read as their current keys, as Karpenter normalizes them (NormalizedLabels, and the AWS
// provider's topology.ebs.csi.aws.com/zone): a pod selecting on them gets a node.
func TestDeprecatedLabelsAreNormalized(t *testing.T) {
	sel := map[string]string{
		"failure-domain.beta.kubernetes.io/zone": "z1", "topology.ebs.csi.aws.com/zone": "z1",
		"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/instance-type": "c5.2x",
	}
	in := Input{NodePools: []NodePool{{Name: "default"}}, Pods: []Pod{pod("a", func(p *Pod) { p.NodeSelector = sel })}}
	plan := solve(t, in)
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("claims %+v, unschedulable %+v", plan.NodeClaims, plan.Unschedulable)
	}
	c := plan.NodeClaims[0]
	if !slices.Equal(c.Zones, []string{"z1"}) || !slices.Equal(c.InstanceTypes, []string{"c5.2x"}) {
		t.Fatalf("zones %v, types %v: want z1, c5.2x", c.Zones, c.InstanceTypes)
	}
}
