package scheduling

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkConsolidation runs one full consolidation pass over a cluster of the real catalog:
// the mixed workload of BenchmarkCatalogWorkload solved onto nodes of at most 16 vCPUs (the
// default pool's solve picks 48xlarge types, which would put ~200 pods on every node), the
// solved nodes repeated to the size wanted, then every fifth node left with a quarter of its
// pods. Every node is a candidate. Metrics: nodes/s for one pass (Consolidate), $/h saved by
// its command; then, applying each command and consolidating again until none is left, the
// settled cost ($/h-settled), the commands it took, nodes/s-settled of the last pass (which
// finds nothing, so it tries every candidate alone), and cost/lb = settled cost ÷ LowerBound of
// the pods left.
func BenchmarkConsolidation(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			in := consolidationCluster(n)
			b.ReportAllocs()
			var res ConsolidationResult
			var err error
			for b.Loop() {
				if res, err = Consolidate(in); err != nil {
					b.Fatal(err)
				}
			}
			perPass := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(len(in.Nodes))/perPass, "nodes/s")
			saved := 0.0
			if res.Command != nil {
				saved = res.Command.SavingsUSDPerHour
			}
			b.ReportMetric(saved, "$/h")
			b.StopTimer()
			before := clusterCost(in)
			steps := 0
			var last time.Duration
			for ; steps < 1000; steps++ {
				start := time.Now()
				res, err := Consolidate(in)
				last = time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if res.Command == nil {
					break
				}
				in = applyCommand(in, *res.Command, fmt.Sprintf("replacement-%d", steps))
			}
			settled := clusterCost(in)
			lbIn := Input{NodePools: in.NodePools, InstanceTypes: in.InstanceTypes}
			for _, n := range in.Nodes {
				for _, p := range n.Pods {
					if movable(&p) {
						lbIn.Pods = append(lbIn.Pods, p)
					}
				}
			}
			lb, err := LowerBound(lbIn)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(before, "$/h-before")
			b.ReportMetric(settled, "$/h-settled")
			b.ReportMetric(float64(steps), "commands")
			// The last pass found nothing: multi-node plus single-node over every candidate.
			b.ReportMetric(float64(len(in.Nodes))/last.Seconds(), "nodes/s-settled")
			b.ReportMetric(settled/lb, "cost/lb")
		})
	}
}

// consolidationCluster builds the benchmark's cluster of about n nodes.
func consolidationCluster(n int) ConsolidationInput {
	w := catalogWorkload("mixed", 2000)
	pool := NodePool{Name: "default", Requirements: []Requirement{{Key: LabelInstanceCPU, Operator: OpLt, Values: []string{"17"}}}}
	w.NodePools = []NodePool{pool}
	plan, err := Solve(w)
	if err != nil || len(plan.Unschedulable) > 0 {
		panic(fmt.Sprintf("building the cluster: %v %v", err, plan.Unschedulable))
	}
	pods := map[string]Pod{}
	for _, p := range w.Pods {
		pods[p.UID] = p
	}
	in := ConsolidationInput{Input: Input{NodePools: w.NodePools, InstanceTypes: w.InstanceTypes}}
	for rep := 0; len(in.Nodes) < n; rep++ {
		for i, nc := range plan.NodeClaims {
			if len(in.Nodes) == n {
				break
			}
			name := fmt.Sprintf("node-%02d-%03d", rep, i)
			it := typeNamed(w.InstanceTypes, nc.InstanceTypes[0])
			node := nodeOf(name, &pool, it, nc.Zones[len(in.Nodes)%len(nc.Zones)], nc.CapacityTypes[0])
			keep := len(nc.PodUIDs)
			if len(in.Nodes)%5 == 0 {
				keep = max(1, keep/4)
			}
			for _, uid := range nc.PodUIDs[:keep] {
				p := pods[uid]
				p.UID = fmt.Sprintf("%02d-%s", rep, uid)
				p.Name = fmt.Sprintf("%s-%02d", p.Name, rep)
				node.Pods = append(node.Pods, p)
			}
			in.Nodes = append(in.Nodes, node)
		}
	}
	in.Candidates = candidatesOf(in.InstanceTypes, in.Nodes)
	return in
}
