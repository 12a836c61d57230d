package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// Follow replays subj from since and then follows it until ctx ends, decoding each message as
// T and calling handler with a context carrying the message's trace. It is for state every
// replica keeps for itself (nothing is acked, no other replica is affected): an ordered
// consumer, recreated by the client if the connection drops. An undecodable message is
// logged and counted (outcome "undecodable") and skipped.
func Follow[T proto.Message](ctx context.Context, c *Conn, subj string, since time.Time, handler func(context.Context, T)) error {
	stream, err := c.js.StreamNameBySubject(ctx, subj)
	if err != nil {
		return fmt.Errorf("finding stream for %s: %w", subj, err)
	}
	cons, err := c.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since,
	})
	if err != nil {
		return fmt.Errorf("following %s: %w", subj, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		v, err := decode[T](msg)
		if err != nil {
			c.metrics.messages.WithLabelValues(msg.Subject(), outcomeUndecodable).Inc()
			c.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("skipping undecodable message")
			return
		}
		c.metrics.messages.WithLabelValues(msg.Subject(), outcomeFollowed).Inc()
		handler(c.propagator.Extract(ctx, HeaderCarrier(msg.Headers())), v)
	})
	if err != nil {
		return fmt.Errorf("following %s: %w", subj, err)
	}
	go func() {
		<-ctx.Done()
		cc.Stop()
	}()
	return nil
}
