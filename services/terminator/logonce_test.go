package main

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"

	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// The decider logs each decision once, and its memory of what it logged does not grow for the
// life of the process: a long-lived terminator sees ever new intent ids.
func TestDecisionLogMemoryIsBounded(t *testing.T) {
	d := &decider{metrics: newMetrics(prometheus.NewRegistry()), log: zerolog.Nop(), blockedLogged: map[string]bool{}}
	decide := func(i int) {
		d.logDecision(action{Intent: &terminationv1.TerminationIntent{IntentId: fmt.Sprintf("uid-%d/empty", i),
			Reason: commonv1.TerminationReason_TERMINATION_REASON_EMPTY}, Why: "test"}, zerolog.Nop())
	}
	for i := 0; i < 25000; i++ {
		decide(i)
		decide(i) // the pass repeats a decision until the node is tainted
	}
	assert.LessOrEqual(t, len(d.blockedLogged), 10000, "the memory is bounded")
	assert.Equal(t, 25000.0, testutil.ToFloat64(d.metrics.decisions.WithLabelValues("empty")), "each decision counted once")
}
