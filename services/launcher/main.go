// Command launcher turns LaunchIntents into EC2 capacity and links the Nodes that register to
// their NodeClaims. It also publishes the instance catalog the scheduler packs against.
//
//	<prefix>.launch.intents ──> resolve EC2NodeClass (subnets, security groups, AMIs; cached;
//	    aliases and ssmParameter terms through SSM, one image per architecture and variant)
//	    ──> instance profile (made for spec.role, or spec.instanceProfile checked; cached)
//	    ──> launch template per distinct configuration (image, user data with labels and taints,
//	        metadata options, public IP, monitoring); each type launches from its variant's
//	        image: nvidia for GPU types, neuron for Neuron
//	    ──> an instance already tagged for the claim? adopt it; else
//	    ──> CreateFleet instant, ClientToken = NodeClaim UID + request hash, class context ──> NodeClaim status, LaunchResult
//	    └─ InsufficientInstanceCapacity ──> <prefix>.offerings.unavailable (3 min), retry others
//	Node registers (providerID) ──> NodeClaim Registered/Initialized, pool labels, startup taints
//	every 5 min: DescribeInstanceTypes/Offerings/SpotPriceHistory ──> catalog KV bucket
//
// Replicas share one durable pull consumer; a redelivered intent finds the claim's instance by
// its karpenter.sh/nodeclaim tag (or, for an unchanged request, CreateFleet's ClientToken
// returns it) and launches nothing new.
package main

import "github.com/fleetwright/fleetwright/pkg/service"

// run is main's work, which the tests run too.
var run = service.Runner("launcher", parseConfig, serve)

func main() { service.Main("launcher", run) }
