// Command terminator takes capacity away: it carries out every NodeClaim deletion (the
// scheduler's disruption decisions — empty, underutilized, drifted, expired — and deletions by
// hand), spot interruptions and claims that never registered, draining through the Eviction API
// so PodDisruptionBudgets hold. It decides no voluntary disruption itself: that is the
// scheduler's, with one budget ledger.
//
//	decision loop (every replica; deterministic intent ids make repeats harmless)
//	  finalizers: karpenter.sh/termination on registered NodeClaims and their Nodes
//	  liveness: a launched claim whose node never registered (--registration-ttl)          │
//	  sweeper: every NodeClaim or Node being deleted (finalizer holds it), with the reason  │
//	           of the decision recorded on it (fleetwright.io/disruption), else manual      │
//	SQS interruption queue ─ long poll ─ parser per (source, detail-type, version)        │
//	  ──> <prefix>.interruptions.<kind> (InterruptionEvent)                                │
//	  └─ SQS DeleteMessage only after the publishes below were acked                      v
//	        │                         <prefix>.terminations.intents (TerminationIntent)
//	        v                                      │ durable pull consumer "terminator",
//	  <prefix>.terminations.urgent ─ "terminator-urgent", --urgent-workers               │ --workers
//	  (interruptions: never queued behind a drain a PodDisruptionBudget holds)             │
//	        └──────────────────────────────────────┤
//	                                               v (queue groups of workers, any replica)
//	  taint karpenter.sh/disrupted:NoSchedule ─> delete NodeClaim (finalizer holds it)
//	  ─> evict pods (429 = PDB, retried with backoff; DaemonSet and mirror pods skipped)
//	  ─> TerminateInstances ─> remove finalizers, delete Node and NodeClaim
//	  ─> <prefix>.terminations.results (TerminationResult)
//
// Every step reads the cluster afresh and is idempotent, so a redelivered intent (a crash, a
// drain longer than one delivery) carries on where the last one stopped.
package main

import "github.com/fleetwright/fleetwright/pkg/service"

// run is main's work, which the tests run too.
var run = service.Runner("terminator", parseConfig, serve)

func main() { service.Main("terminator", run) }
