// Command pod-watcher watches pods that kube-scheduler could not place and publishes them in
// batches (fleetwright.pods.v1.PendingPodBatch on <prefix>.pods.pending) for the scheduler.
//
//	informer (unbound pods) ──pending & not nominated──> batching window (1 s idle, 10 s max)
//	                                                   ──> PendingPodBatch, Nats-Msg-Id = batch id
//
// Several replicas may run: the batch id is a hash of the pods and the resync epoch, so
// replicas that see the same pods publish the same id and JetStream keeps one copy.
package main

import "github.com/fleetwright/fleetwright/pkg/service"

// run is main's work, which the tests run too.
var run = service.Runner("pod-watcher", parseConfig, serve)

func main() { service.Main("pod-watcher", run) }
