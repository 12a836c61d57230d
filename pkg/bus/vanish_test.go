package bus_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

// A durable consumer deleted under a running Consume (by an operator, or lost with a stream
// rebuilt from backup) is created again with the same spec, and its messages are handled.
func TestConsumeRecreatesADeletedConsumer(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "vanish")
	ctx := context.Background()
	subj := e.prefix.Of(subject.PodsPending)
	var got received[string]
	collect(t, c, bus.ConsumerSpec{Durable: "vanish", Subject: subj, Batch: 1}, &got, value)
	acked := func(seq uint64) func() bool {
		return func() bool {
			cons, err := c.JetStream().Consumer(ctx, e.prefix.Stream(subject.StreamPods), "vanish")
			return err == nil && cons.CachedInfo().AckFloor.Stream == seq
		}
	}
	require.NoError(t, c.Publish(ctx, subj, str("first"), "m-first"))
	require.Eventually(t, acked(1), waitFor, tick, "the first message is handled and acked")
	// Consume reads the ack floor after a batch, at most once a second: after the first batch it
	// knows the first message was acked (the second may be handled again after the
	// re-creation, which handlers allow).
	require.NoError(t, c.Publish(ctx, subj, str("second"), "m-second"))
	require.Eventually(t, acked(2), waitFor, tick)
	// The floor read after the first batch may have come before the server counted that ack,
	// and the second batch came within the second: a third batch a second later reads the floor
	// again, after the server has counted the first two.
	time.Sleep(1100 * time.Millisecond)
	require.NoError(t, c.Publish(ctx, subj, str("third"), "m-third"))
	require.Eventually(t, acked(3), waitFor, tick)

	require.NoError(t, c.JetStream().DeleteConsumer(ctx, e.prefix.Stream(subject.StreamPods), "vanish"))
	require.NoError(t, c.Publish(ctx, subj, str("after"), "m-after"))
	require.Eventually(t, func() bool { return slices.Contains(got.snapshot(), "after") }, waitFor, tick,
		"the message published after the consumer was deleted is handled: %v", got.snapshot())
	assert.Equal(t, "first", got.snapshot()[0])
	assert.NotContains(t, got.snapshot()[1:], "first", "the re-created consumer resumes after what it knew was acked, not from the stream's start")
	_, err := c.JetStream().Consumer(ctx, e.prefix.Stream(subject.StreamPods), "vanish")
	require.NoError(t, err, "the consumer exists again")
	assert.NoError(t, c.Ready(ctx))
}

// While a running Consume's consumer cannot be ensured (here its stream is gone), the
// connection is not ready, naming the consumer; once the stream is back, the consumer is
// re-created, readiness recovers and messages flow again.
func TestReadinessReportsAConsumerThatCannotBeEnsured(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "unready")
	ctx := context.Background()
	subj := e.prefix.Of(subject.LaunchIntents)
	var got received[string]
	collect(t, c, bus.ConsumerSpec{Durable: "unready", Subject: subj}, &got, value)
	require.NoError(t, c.Publish(ctx, subj, str("one"), "m-one"))
	require.Eventually(t, func() bool { return len(got.snapshot()) == 1 }, waitFor, tick)
	require.NoError(t, c.Ready(ctx))

	require.NoError(t, c.JetStream().DeleteStream(ctx, e.prefix.Stream(subject.StreamLaunch)))
	require.Eventually(t, func() bool {
		err := c.Ready(ctx)
		return err != nil && assert.ErrorContains(t, err, "unready")
	}, waitFor, tick, "not ready while the consumer cannot be re-created")

	require.NoError(t, c.EnsureStreams(ctx))
	require.Eventually(t, func() bool { return c.Ready(ctx) == nil }, waitFor, tick, "ready again once it is re-created")
	require.NoError(t, c.Publish(ctx, subj, str("two"), "m-two"))
	require.Eventually(t, func() bool { return len(got.snapshot()) == 2 }, waitFor, tick)
}
