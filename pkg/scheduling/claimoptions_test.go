package scheduling

import (
	"slices"
	"testing"
)

// A claim made by hand launches as any type its requirements and requests allow, on the
// offerings its requirements allow, cheapest first.
func TestClaimOptions(t *testing.T) {
	reqs := []Requirement{
		{Key: LabelInstanceCategory, Operator: OpIn, Values: []string{"c"}},
		{Key: LabelInstanceGeneration, Operator: OpGt, Values: []string{"5"}},
		{Key: LabelCapacityType, Operator: OpIn, Values: []string{CapacityTypeOnDemand}},
		{Key: LabelZone, Operator: OpNotIn, Values: []string{"z3"}},
		{Key: "team", Operator: OpIn, Values: []string{"a"}}, // a label the claim gives its node: no constraint on the type
	}
	opts, err := ClaimOptions(reqs, ResourceList{ResourceCPU: 3000}, smallCatalog(), nil, []OfferingKey{{InstanceType: "c6.4x", Zone: "z1", CapacityType: CapacityTypeOnDemand}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range opts {
		names = append(names, o.Name)
		for _, off := range o.Offerings {
			if off.CapacityType != CapacityTypeOnDemand || off.Zone == "z3" || (o.Name == "c6.4x" && off.Zone == "z1") {
				t.Errorf("%s: offering %+v the claim does not allow", o.Name, off)
			}
		}
	}
	// Category c of generation 6 with at least 3 CPUs allocatable, both architectures, cheapest first.
	want := []string{"c6.4x", "c6g.4x", "c6.8x", "c6g.8x", "c6.16x", "c6g.16x", "c6.32x", "c6g.32x"}
	if !slices.Equal(names, want) {
		t.Fatalf("options %v, want %v", names, want)
	}
}
