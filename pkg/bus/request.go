package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
)

// defaultRequestTimeout applies when a request's context has no deadline.
const defaultRequestTimeout = 10 * time.Second

// RemoteError is the error a request/reply handler returned on the serving
// side, carried back in the Fw-Error header.
type RemoteError struct {
	Subject string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s replied with error: %s", e.Subject, e.Message)
}

// Request sends req on subj over core NATS and decodes the reply into a new
// Resp. Trace context travels in the request headers. An error the handler
// returned comes back as *RemoteError; no server listening gives an error
// wrapping nats.ErrNoResponders. Without a deadline on ctx, it waits 10s.
func Request[Resp proto.Message](ctx context.Context, c *Conn, subj string, req proto.Message) (Resp, error) {
	var zero Resp
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	ctx, span := c.tracer.Start(ctx, "request "+subj,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", subj)))
	defer span.End()

	m, err := c.newMsg(ctx, subj, req)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return zero, fmt.Errorf("requesting %s: %w", subj, err)
	}
	reply, err := c.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return zero, fmt.Errorf("requesting %s: %w", subj, err)
	}
	if msg := reply.Header.Get(HeaderError); msg != "" {
		span.SetStatus(codes.Error, msg)
		return zero, &RemoteError{Subject: subj, Message: msg}
	}
	resp := zero.ProtoReflect().Type().New().Interface().(Resp)
	if err := proto.Unmarshal(reply.Data, resp); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return zero, fmt.Errorf("decoding reply from %s: %w", subj, err)
	}
	return resp, nil
}

// ReplyHandler answers one request.
type ReplyHandler[Req, Resp proto.Message] func(ctx context.Context, req Req) (Resp, error)

// Serve answers requests on subj in queue group queue (replicas share the
// load) until ctx is cancelled, then drains the subscription so requests in
// flight are answered. The handler's context carries the requester's trace
// context; its error travels back in the Fw-Error header. An undecodable
// request is answered with an error, never fatal.
func Serve[Req, Resp proto.Message](ctx context.Context, c *Conn, subj, queue string, handler ReplyHandler[Req, Resp]) (*nats.Subscription, error) {
	base := context.WithoutCancel(ctx)
	sub, err := c.nc.QueueSubscribe(subj, queue, func(m *nats.Msg) {
		c.serveOne(base, m, func(ctx context.Context, data []byte, header nats.Header) (proto.Message, error) {
			var zero Req
			req := zero.ProtoReflect().Type().New().Interface().(Req)
			want := string(req.ProtoReflect().Descriptor().FullName())
			if got := header.Get(HeaderType); got != "" && got != want {
				return nil, fmt.Errorf("decoding request: type %s, want %s", got, want)
			}
			if err := proto.Unmarshal(data, req); err != nil {
				return nil, fmt.Errorf("decoding request %s: %w", want, err)
			}
			return handler(ctx, req)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("serving %s: %w", subj, err)
	}
	// Return only once the server knows the interest, so a request sent
	// right after Serve (from any connection) finds a responder.
	if err := c.nc.FlushTimeout(5 * time.Second); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("serving %s: %w", subj, err)
	}
	go func() {
		<-ctx.Done()
		if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			c.log.Warn().Err(err).Str("subject", subj).Msg("draining request subscription")
		}
	}()
	return sub, nil
}

// serveOne runs call for one request and sends the reply.
func (c *Conn) serveOne(base context.Context, m *nats.Msg, call func(context.Context, []byte, nats.Header) (proto.Message, error)) {
	if m.Reply == "" {
		return // a publish, not a request: nobody to answer
	}
	ctx := c.propagator.Extract(base, HeaderCarrier(m.Header))
	ctx, span := c.tracer.Start(ctx, "serve "+m.Subject,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", m.Subject)))
	defer span.End()

	resp, err := safeCall(ctx, m, call)
	reply := nats.NewMsg(m.Reply)
	if err == nil {
		reply.Data, err = proto.Marshal(resp)
		if err == nil {
			reply.Header.Set(HeaderType, string(resp.ProtoReflect().Descriptor().FullName()))
		}
	}
	result := "ok"
	if err != nil {
		result = "error"
		span.SetStatus(codes.Error, err.Error())
		reply.Data = nil
		reply.Header.Set(HeaderError, truncate(err.Error(), 4096))
	}
	c.propagator.Inject(ctx, HeaderCarrier(reply.Header))
	c.metrics.requests.WithLabelValues(m.Subject, result).Inc()
	if err := m.RespondMsg(reply); err != nil {
		c.log.Warn().Err(err).Str("subject", m.Subject).Msg("sending reply")
	}
}

func safeCall(ctx context.Context, m *nats.Msg, call func(context.Context, []byte, nats.Header) (proto.Message, error)) (resp proto.Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	resp, err = call(ctx, m.Data, m.Header)
	if err == nil && (resp == nil || !resp.ProtoReflect().IsValid()) {
		err = fmt.Errorf("handler returned no response")
	}
	return resp, err
}
