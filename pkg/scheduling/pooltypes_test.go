package scheduling

import (
	"reflect"
	"testing"
)

// A pool whose own requirements leave no instance type, or fewer than its minValues, is named in
// the plan (Karpenter's NoCompatibleInstanceTypes event on the NodePool says so); a pool with
// types is not.
func TestPoolsWithoutTypes(t *testing.T) {
	types := func(v ...string) Requirement { return Requirement{Key: LabelInstanceType, Operator: OpIn, Values: v} }
	in := Input{NodePools: []NodePool{
		{Name: "ok", Requirements: []Requirement{types("c5.2x", "m5.2x")}},
		{Name: "nothing", Requirements: []Requirement{types("nope-1")}},
		{Name: "minvalues", Requirements: []Requirement{func() Requirement { r := types("c5.2x", "nope-1", "nope-2"); r.MinValues = 3; return r }()}},
	}, Pods: []Pod{pod("a")}}
	plan := solve(t, in)
	want := []PoolWithoutTypes{{NodePool: "minvalues", MinValues: true}, {NodePool: "nothing"}}
	if !reflect.DeepEqual(plan.PoolsWithoutTypes, want) {
		t.Fatalf("pools without types %+v, want %+v", plan.PoolsWithoutTypes, want)
	}
}
