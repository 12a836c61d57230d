package bus_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

func benchConn(b *testing.B) *bus.Conn {
	b.Helper()
	srv := bustest.RunServer(b)
	ctx := context.Background()
	c, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Prefix: "fwbench", Registerer: prometheus.NewRegistry()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	require.NoError(b, c.EnsureStreams(ctx))
	return c
}

// BenchmarkPublish measures a durable publish: encode, headers, wait for the
// JetStream PubAck (file storage).
func BenchmarkPublish(b *testing.B) {
	c := benchConn(b)
	subj := c.Prefix().Of(subject.LaunchIntents)
	msg := wrapperspb.String("default-x7k2p")
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Publish(ctx, subj, msg, strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkPublishConsume measures end to end: publish b.N messages, then
// consume them all with explicit (double) acks.
func BenchmarkPublishConsume(b *testing.B) {
	c := benchConn(b)
	subj := c.Prefix().Of(subject.PodsPending)
	ctx := context.Background()
	var handled atomic.Int64
	done := make(chan struct{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Publish(ctx, subj, wrapperspb.String("batch"), strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = bus.Consume(cctx, c, bus.ConsumerSpec{Durable: "bench", Subject: subj, Batch: 100, FetchWait: 100 * time.Millisecond},
			func(context.Context, *wrapperspb.StringValue, bus.Delivery) error {
				if handled.Add(1) == int64(b.N) {
					close(done)
				}
				return nil
			})
	}()
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
