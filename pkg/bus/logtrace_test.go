package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
)

// jsonLines decodes a log's JSON lines.
func jsonLines(b *bustest.Buffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// What the consumer logs about a message it handles carries the trace and span the handler ran
// in, so a log line leads to its trace.
func TestConsumerLogLinesCarryTheHandlersSpan(t *testing.T) {
	e := newEnv(t)
	var out bustest.Buffer
	log := telemetry.NewLoggerTo(&out, "test", "dev", "info")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := bus.Connect(ctx, bus.Config{URL: e.url, Name: "logs", Prefix: string(e.prefix), Registerer: e.registry, TracerProvider: e.tp, Logger: &log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.EnsureStreams(ctx))
	subj := e.prefix.Of(subject.PodsPending)

	var got received[trace.SpanContext]
	runConsumer(t, func(ctx context.Context) error {
		return bus.Consume(ctx, c, bus.ConsumerSpec{Durable: "logs", Subject: subj, NakDelays: []time.Duration{10 * time.Millisecond}},
			func(ctx context.Context, _ *wrapperspb.StringValue, d bus.Delivery) error {
				got.add(trace.SpanContextFromContext(ctx))
				if d.Attempt == 1 {
					return errors.New("not yet")
				}
				return nil
			})
	})
	require.NoError(t, c.Publish(ctx, subj, str("batch-1"), "batch-1"))
	require.Eventually(t, func() bool { return len(got.snapshot()) == 2 }, waitFor, tick)

	first := got.snapshot()[0]
	require.True(t, first.IsValid())
	var line map[string]any
	for _, l := range jsonLines(&out) {
		if l["message"] == "handler failed; will retry" {
			line = l
		}
	}
	require.NotNil(t, line, "the consumer logged the failure")
	assert.Equal(t, first.TraceID().String(), line["trace_id"])
	assert.Equal(t, first.SpanID().String(), line["span_id"], "the span the handler ran in")
}
