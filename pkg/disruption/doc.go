// Package disruption is the one home of disruption's rules: which nodes may be taken away, what
// holds them back, how many may go at once, when a node is drifted, and the steps a decision
// takes, in Karpenter v1's order. Pure functions of plain data (the joined view of
// clusterstate.NodeView, pools, budgets, the clock); the scheduler's decider and the terminator
// call them and act, and neither decides a rule on its own.
//
//	clusterstate.NodeView ─┬─ Candidates ─▶ []Candidate (Movable pods, Consolidatable, Drifted,
//	  (claim ⋈ node ⋈ pool │                 Blocked by do-not-disrupt / a PodDisruptionBudget)
//	   ⋈ pods)             │               + []Block (awaited by a pending pod, node do-not-disrupt)
//	                       ├─ NewLedger ───▶ Ledger: Counted, Disrupting per pool (Karpenter's rule)
//	budgets, reason, now ──┴───────────────▶ Ledger.Allowed (budget.go's Allowed) / Ledger.Take
//	claim, pool, class ──── Drifted ───────▶ Drift{Reason, Message}
//	Decision + Observed ─── Decision.Next ─▶ Move: taint → launch → wait → delete | abandon | done
//	pod, now ────────────── DoNotDisrupt ──▶ protected, until ("true" or a duration from start)
//	PDB, pod ────────────── Selects ───────▶ policy/v1 selector semantics ({} selects all)
//	interruption event ──── Drains ────────▶ whether it drains the node at once
//
// What is where:
//
//	candidates.go  Candidates, Movable, ConsolidateAfter, Expired
//	blockers.go    Cause, Block, Blocker, DoNotDisrupt, Selects
//	ledger.go      Counted, Disrupting, Marked, Ledger
//	budget.go      Allowed and the reading of a budget; Replacing
//	decision.go    DecisionAnnotation, Decision (the record on each claim), Step, Next
//	drift.go       Drifted, Rehash (drift detection, Karpenter's reasons)
//	interruption.go Drains
package disruption
