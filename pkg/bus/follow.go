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
// logged, counted (outcome "undecodable"), dead-lettered (once, however many replicas follow
// the subject: the dead letter's id is the stored message's) and skipped.
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
			c.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("skipping undecodable message; dead-lettering it")
			c.followDeadLetter(ctx, msg, err)
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

// followDeadLetter parks an undecodable followed message. Every replica following the subject
// does so; the dead letter's Nats-Msg-Id (the stream and sequence) makes JetStream keep one.
// A failure is logged: the message stays in its stream, nothing is lost.
func (c *Conn) followDeadLetter(ctx context.Context, msg jetstream.Msg, cause error) {
	d := Delivery{Subject: msg.Subject(), Header: msg.Headers(), MsgID: msg.Headers().Get(HeaderMsgID), Attempt: 1}
	if meta, err := msg.Metadata(); err == nil {
		d.Stream, d.Sequence = meta.Stream, meta.Sequence.Stream
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := c.publishDeadLetter(dctx, d, msg.Data(), cause); err != nil {
		c.log.Error().Err(err).Str("subject", d.Subject).Msg("dead-lettering an undecodable followed message failed")
	}
}
