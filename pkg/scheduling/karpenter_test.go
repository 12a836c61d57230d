package scheduling

import (
	"reflect"
	"testing"
)

// TestKarpenterWorkloadPlan checks the benchmark's plan for correctness, node count and
// determinism at a size that runs quickly.
func TestKarpenterWorkloadPlan(t *testing.T) {
	in := karpenterInput(2000)
	plan, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("%d unschedulable: %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
	checkPlan(t, in, plan)
	if got, want := len(plan.NodeClaims), 2000/5; got > want {
		t.Fatalf("%d nodes, want at most %d", got, want)
	}
	again, _ := Solve(karpenterInput(2000))
	if !reflect.DeepEqual(plan, again) {
		t.Fatal("same input gave a different plan")
	}
}
