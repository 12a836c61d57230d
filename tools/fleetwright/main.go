// Command fleetwright is the operator's CLI (package cli): why a node or pod is what it is,
// simulate, tap, dead letters, preflight. The same code is the kubectl plugin
// kubectl-fleetwright (tools/kubectl-fleetwright).
//
//	go install ./tools/fleetwright    (from a checkout)
package main

import "github.com/fleetwright/fleetwright/tools/fleetwright/cli"

func main() { cli.Main("fleetwright") }
