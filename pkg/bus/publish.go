package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
)

// PublishResult is what JetStream acknowledged.
type PublishResult struct {
	Stream    string
	Sequence  uint64
	Duplicate bool // the stream already held a message with this Nats-Msg-Id
}

// Publish stores msg on subj durably: it encodes msg, sets Nats-Msg-Id (when
// msgID is not empty), Fw-Type and W3C trace context headers, and waits for
// JetStream's acknowledgement. A duplicate within the stream's window is not
// an error; see PublishAck to tell.
func (c *Conn) Publish(ctx context.Context, subj string, msg proto.Message, msgID string) error {
	_, err := c.PublishAck(ctx, subj, msg, msgID)
	return err
}

// PublishAck is Publish returning the acknowledgement.
func (c *Conn) PublishAck(ctx context.Context, subj string, msg proto.Message, msgID string) (PublishResult, error) {
	ctx, span := c.tracer.Start(ctx, "publish "+subj,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", subj),
			attribute.String("messaging.message.id", msgID),
		))
	defer span.End()

	m, err := c.newMsg(ctx, subj, msg)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		c.metrics.published.WithLabelValues(subj, "error").Inc()
		return PublishResult{}, fmt.Errorf("publishing to %s: %w", subj, err)
	}
	if msgID != "" {
		m.Header.Set(HeaderMsgID, msgID)
	}
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		c.metrics.published.WithLabelValues(subj, "error").Inc()
		return PublishResult{}, fmt.Errorf("publishing to %s: %w", subj, err)
	}
	result := "ok"
	if ack.Duplicate {
		result = "duplicate"
	}
	span.SetAttributes(attribute.Bool("messaging.nats.duplicate", ack.Duplicate))
	c.metrics.published.WithLabelValues(subj, result).Inc()
	return PublishResult{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// newMsg encodes msg and sets the type and trace context headers from ctx.
func (c *Conn) newMsg(ctx context.Context, subj string, msg proto.Message) (*nats.Msg, error) {
	data, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", msg, err)
	}
	m := nats.NewMsg(subj)
	m.Data = data
	m.Header.Set(HeaderType, string(msg.ProtoReflect().Descriptor().FullName()))
	c.propagator.Inject(ctx, HeaderCarrier(m.Header))
	return m, nil
}
