package disruption

import (
	"testing"

	"github.com/stretchr/testify/assert"

	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
)

// Spot interruptions, scheduled changes and stopping state changes act; rebalance
// recommendations and other state changes are only recorded.
func TestDrains(t *testing.T) {
	ev := func(k commonv1.InterruptionKind, state string) *interruptionv1.InterruptionEvent {
		return &interruptionv1.InterruptionEvent{Kind: k, State: state}
	}
	assert.True(t, Drains(ev(commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION, "terminate")))
	assert.True(t, Drains(ev(commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE, "")))
	for _, st := range []string{"stopping", "stopped", "shutting-down", "terminated"} {
		assert.True(t, Drains(ev(commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, st)), st)
	}
	assert.False(t, Drains(ev(commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, "running")))
	assert.False(t, Drains(ev(commonv1.InterruptionKind_INTERRUPTION_KIND_REBALANCE_RECOMMENDATION, "")))
	assert.False(t, Drains(ev(commonv1.InterruptionKind_INTERRUPTION_KIND_UNSPECIFIED, "")))
}
