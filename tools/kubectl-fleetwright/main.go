// Command kubectl-fleetwright is the operator's CLI (package cli) as a kubectl plugin: on PATH,
// kubectl runs it for `kubectl fleetwright ...`, with kubectl's kubeconfig and context.
//
//	go install ./tools/kubectl-fleetwright    (from a checkout)
//	kubectl fleetwright why node ip-10-0-1-23.ec2.internal
//	kubectl fleetwright completion kubectl > ~/bin/kubectl_complete-fleetwright && chmod +x ~/bin/kubectl_complete-fleetwright
package main

import "github.com/fleetwright/fleetwright/tools/fleetwright/cli"

func main() { cli.Main("kubectl fleetwright") }
