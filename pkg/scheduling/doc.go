// Package scheduling is Fleetwright's scheduling core: a pure function from pending pods,
// cluster state (existing nodes and in-flight NodeClaims with their pods), DaemonSets,
// NodePools and the instance catalog to a Plan of new NodeClaims, placements onto existing
// capacity, and an explanation in words for every pod left unplaced. It imports nothing from
// NATS, AWS or client-go; the scheduler service converts its inputs into these plain types.
//
// See README.md for the flow, the semantics it follows and how to run the benchmarks.
package scheduling
