package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 16: a leader that died left pods pending, one claim made but none of its pods
// nominated, and its batches unacked. The next leader offers every such pod at once — no batch
// is published here, so nothing but the takeover can place them — and packs them together,
// using the dead leader's claim before making any new one.
func TestTakeoverOffersWaitingPodsAtOnceAndTogether(t *testing.T) {
	e := newEnv(t, "sched-takeover", v1Example)
	left := e.pendingPods("left", 5, "500m")
	e.createClaim("default-dead-leader", true) // a t4g.medium with room the dead leader planned
	e.start("takeover")

	require.Eventually(t, func() bool { return e.allNominated(left) }, 30*time.Second, 100*time.Millisecond,
		"every waiting pod is nominated without a batch from pod-watcher")
	claims := map[string]int{}
	for _, claim := range e.nominations(left) {
		claims[claim]++
	}
	assert.Positive(t, claims["default-dead-leader"], "the dead leader's claim takes pods before a new one is made: %v", claims)
	fresh := 0
	for _, c := range e.nodeClaims() {
		if c.Name == "default-dead-leader" {
			continue
		}
		fresh++
		assert.True(t, strings.HasPrefix(c.Annotations[batchAnnotation], "takeover-takeover-"), "claim %s made at takeover (batch %q)", c.Name, c.Annotations[batchAnnotation])
	}
	assert.LessOrEqual(t, fresh, 1, "the rest are packed onto one new claim, not one each: %v", claims)
	assert.Contains(t, e.logs.String(), "offering every pending pod without a live nomination at once")
}
