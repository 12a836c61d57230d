package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A killed service is started again at once; one that keeps dying waits longer each time, up
// to a minute; one that ran for a while is started again at once.
func TestRestartBacksOffACrashLoop(t *testing.T) {
	var r restart
	t0 := time.Unix(1_000_000, 0)
	assert.True(t, r.due(t0), "the first death: at once")
	assert.False(t, r.due(t0.Add(500*time.Millisecond)), "dead again within a second: wait")
	assert.True(t, r.due(t0.Add(time.Second)))
	assert.False(t, r.due(t0.Add(2500*time.Millisecond)), "the delay doubled to 2 s")
	assert.True(t, r.due(t0.Add(3*time.Second)))
	now := t0.Add(3 * time.Second)
	for i := 0; i < 10; i++ {
		now = now.Add(r.delay)
		assert.True(t, r.due(now))
	}
	assert.Equal(t, time.Minute, r.delay, "the delay stops growing at a minute")
	assert.True(t, r.due(now.Add(3*time.Minute)), "after a long run: at once")
	assert.Equal(t, time.Second, r.delay, "and the delay starts over")
}
