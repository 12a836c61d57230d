package disruption

import (
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
)

// stoppingStates are the instance states Karpenter drains for.
var stoppingStates = map[string]bool{"stopping": true, "stopped": true, "shutting-down": true, "terminated": true}

// Drains reports whether an interruption event drains the instance's node at once: spot
// interruptions, scheduled changes and state changes to a stopping state do; rebalance
// recommendations (and other state changes) are recorded only. The terminator drains on it; the
// scheduler asks for replacement capacity for the node's pods on it.
func Drains(ev *interruptionv1.InterruptionEvent) bool {
	switch ev.GetKind() {
	case commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION, commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE:
		return true
	case commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE:
		return stoppingStates[ev.GetState()]
	}
	return false
}
