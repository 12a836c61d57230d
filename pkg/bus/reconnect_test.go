package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

func TestConsumerSurvivesServerRestart(t *testing.T) {
	srv := bustest.RunServer(t)
	var logs bustest.Buffer
	log := zerolog.New(&logs)
	ctx := context.Background()
	c, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Prefix: "fwre", Logger: &log, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.EnsureStreams(ctx))
	subj := c.Prefix().Of(subject.OfferingsUnavailable)

	var got received[string]
	collect(t, c, bus.ConsumerSpec{Durable: "scheduler-ice", Subject: subj, FetchWait: 200 * time.Millisecond}, &got, value)
	require.NoError(t, c.Publish(ctx, subj, wrapperspb.String("before"), "before"))
	require.Eventually(t, func() bool { return len(got.snapshot()) == 1 }, waitFor, tick)

	bustest.Restart(t, srv)
	require.Eventually(t, func() bool { return c.Ready(ctx) == nil }, waitFor, tick, "client reconnects")
	require.Eventually(t, func() bool {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return c.Publish(pctx, subj, wrapperspb.String("after"), "after") == nil
	}, waitFor, tick)
	require.Eventually(t, func() bool { return len(got.snapshot()) == 2 }, waitFor, tick,
		"the same durable consumer goes on after the restart")
	assert.Equal(t, []string{"before", "after"}, got.snapshot())
	assert.True(t, strings.Contains(logs.String(), "disconnected from nats"), logs.String())
	assert.True(t, strings.Contains(logs.String(), "reconnected to nats"), logs.String())
}

func TestConnectGivesUpWithContext(t *testing.T) {
	srv := bustest.RunServer(t)
	url := srv.ClientURL()
	srv.Shutdown()
	srv.WaitForShutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := bus.Connect(ctx, bus.Config{URL: url, Registerer: prometheus.NewRegistry()})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
