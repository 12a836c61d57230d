// Command scheduler turns batches of pending pods into NodeClaims. It consumes
// fleetwright.pods.v1.PendingPodBatch from <prefix>.pods.pending, runs the pure scheduling core
// (pkg/scheduling) against the cluster as its informers see it, writes each planned NodeClaim
// to the Kubernetes API, nominates the pods to it, and publishes one
// fleetwright.launch.v1.LaunchIntent per NodeClaim on <prefix>.launch.intents.
//
//	pods.pending ─► drop pods no longer pending or already nominated
//	             ─► Input: nodes + in-flight NodeClaims (with their pods), DaemonSets,
//	                NodePools (v1, and v1alpha5 Provisioners translated), catalog (KV bucket)
//	                minus unavailable offerings (offerings.unavailable)
//	             ─► scheduling.Solve ─► per claim: create NodeClaim, annotate + event pods,
//	                publish LaunchIntent (Nats-Msg-Id = NodeClaim name) ─► ack
//
// Replicas run active/standby under the Lease "fleetwright-scheduler": only the leader
// consumes batches and republishes the intents of NodeClaims not launched yet (so a crash
// between creating a NodeClaim and publishing its intent loses nothing). The leader also
// disrupts voluntarily (consolidation, drift: disruption.go), publishing the TerminationIntents
// of its decisions on <prefix>.terminations.intents and each decision and block as a
// DisruptionDecision on <prefix>.terminations.decisions for the audit stream (announce.go).
package main

import "github.com/fleetwright/fleetwright/pkg/service"

// run is main's work, which the tests run too.
var run = service.Runner("scheduler", parseConfig, serve)

func main() { service.Main("scheduler", run) }
