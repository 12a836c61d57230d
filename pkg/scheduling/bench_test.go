package scheduling

import (
	"fmt"
	"testing"
)

var benchSizes = []int{100, 1000, 5000, 10000, 20000}

// BenchmarkKarpenterWorkload reproduces Karpenter's own scheduling benchmark (see
// karpenterPods and karpenterTypes).
func BenchmarkKarpenterWorkload(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			runSolveBenchmark(b, karpenterInput(n), false)
		})
	}
}

// BenchmarkRespectPreferences ports Karpenter's preference benchmark (issue 14): 4,000 app=nginx
// pods, each preferring one zone (node affinity), with a zone anti-affinity preference of weight
// 10 that cannot hold past the third pod and a hostname anti-affinity preference of weight 1, on
// the benchmark's instance types. Karpenter measured 47 pods/s on it.
func BenchmarkRespectPreferences(b *testing.B) {
	in := Input{Pods: preferencePods(4000), NodePools: []NodePool{karpenterPool()}, InstanceTypes: karpenterTypes()}
	runSolveBenchmark(b, in, false)
}

// BenchmarkCatalogWorkload runs the real catalog (pkg/catalog, three zones, Karpenter's
// default requirements) against four workloads.
func BenchmarkCatalogWorkload(b *testing.B) {
	for _, w := range []string{"mixed", "memory-heavy", "gpu", "large-pod"} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/pods=%d", w, n), func(b *testing.B) {
				runSolveBenchmark(b, catalogWorkload(w, n), true)
			})
		}
	}
}

func runSolveBenchmark(b *testing.B, in Input, withBound bool) {
	b.ReportAllocs()
	var plan Plan
	var err error
	for b.Loop() {
		if plan, err = Solve(in); err != nil {
			b.Fatal(err)
		}
	}
	if len(plan.Unschedulable) > 0 {
		b.Fatalf("%d pods unschedulable, first: %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
	perSolve := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(len(in.Pods))/perSolve, "pods/s")
	b.ReportMetric(float64(len(plan.NodeClaims)), "nodes")
	b.ReportMetric(plan.CostUSDPerHour(), "$/h")
	lb, err := LowerBound(in)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(plan.CostUSDPerHour()/lb, "cost/lb")
}
