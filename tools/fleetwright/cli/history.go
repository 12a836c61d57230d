package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

// This file reads the bus's history. "History" is what JetStream keeps: the audit stream
// (<PREFIX>_AUDIT, a copy of every work stream kept 30 days, see deploy/base/nats) where it
// exists, else the work streams themselves (kept 24 h, the dead letters a week). Each read is
// an ordered consumer (ephemeral, nothing acknowledged, nothing taken from the services'
// durable consumers), from the start of the retention or from a start time.

// stored is one message read back from a stream.
type stored struct {
	Stream string
	Seq    uint64
	Time   time.Time // when the stream stored it
	Msg    *nats.Msg
}

// decode returns the message's payload decoded with its Fw-Type, or nil if it does not decode.
func (s stored) decode() proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(s.Msg.Header.Get(bus.HeaderType)))
	if err != nil {
		return nil
	}
	m := mt.New().Interface()
	if proto.Unmarshal(s.Msg.Data, m) != nil {
		return nil
	}
	return m
}

// traceID is the W3C trace id of the message's traceparent header, or "".
func (s stored) traceID() string {
	parts := strings.Split(s.Msg.Header.Get("traceparent"), "-")
	if len(parts) != 4 || len(parts[1]) != 32 || strings.Trim(parts[1], "0") == "" {
		return ""
	}
	return parts[1]
}

// history reads stored messages.
type history struct {
	js     jetstream.JetStream
	prefix subject.Prefix
	stream string // --stream: read this stream only; "" means the audit stream, else the work streams
}

func newHistory(conn *bus.Conn, stream string) history {
	return history{js: conn.JetStream(), prefix: conn.Prefix(), stream: stream}
}

// auditStream is the stream deploy/ keeps every message in (tools/deploytest.AuditStream).
func (h history) auditStream() string { return h.prefix.Stream("AUDIT") }

// source is one stream and the filter subjects to read from it.
type source struct {
	stream  string
	filters []string
}

// sources says where to read the subjects: the --stream named, the audit stream if it exists,
// else each work stream that holds some of them.
func (h history) sources(ctx context.Context, subjects []string) ([]source, error) {
	if h.stream != "" {
		if _, err := h.js.Stream(ctx, h.stream); err != nil {
			return nil, fmt.Errorf("stream %s: %w", h.stream, err)
		}
		return []source{{h.stream, subjects}}, nil
	}
	if _, err := h.js.Stream(ctx, h.auditStream()); err == nil {
		return []source{{h.auditStream(), subjects}}, nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("looking for the audit stream %s: %w", h.auditStream(), err)
	}
	var out []source
	for _, key := range subject.Streams() {
		holds := h.prefix.StreamSubjects(key)
		var filters []string
		for _, s := range subjects {
			switch {
			case covers(s, holds):
				filters = append(filters, holds)
			case covers(holds, s):
				filters = append(filters, s)
			}
		}
		if len(filters) > 0 {
			out = append(out, source{h.prefix.Stream(key), filters})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no stream holds %s", strings.Join(subjects, ", "))
	}
	return out, nil
}

// covers reports whether the subject pattern a matches every subject pattern b matches.
func covers(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i, tok := range at {
		if tok == ">" {
			return i < len(bt)
		}
		if i >= len(bt) || bt[i] == ">" {
			return false
		}
		if tok != "*" && (bt[i] == "*" || tok != bt[i]) {
			return false
		}
	}
	return len(at) == len(bt)
}

// read returns the stored messages on the subjects from since (zero: the whole retention),
// oldest first.
func (h history) read(ctx context.Context, subjects []string, since time.Time) ([]stored, error) {
	srcs, err := h.sources(ctx, subjects)
	if err != nil {
		return nil, err
	}
	var out []stored
	for _, src := range srcs {
		err := h.each(ctx, src, since, false, func(s stored) error {
			out = append(out, s)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// follow calls fn with each stored message on the subjects from since, then with each new one
// until ctx ends. With several streams, messages come in order per stream.
func (h history) follow(ctx context.Context, subjects []string, since time.Time, fn func(stored) error) error {
	srcs, err := h.sources(ctx, subjects)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan stored)
	errs := make(chan error, len(srcs))
	for _, src := range srcs {
		go func() {
			errs <- h.each(ctx, src, since, true, func(s stored) error {
				select {
				case msgs <- s:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
	}
	for {
		select {
		case s := <-msgs:
			if err := fn(s); err != nil {
				return err
			}
		case err := <-errs:
			if ctx.Err() == nil && err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// each reads one source with an ordered consumer: to the last message stored when it started,
// or, following, on until ctx ends.
func (h history) each(ctx context.Context, src source, since time.Time, following bool, fn func(stored) error) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: src.filters, DeliverPolicy: jetstream.DeliverAllPolicy}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := h.js.OrderedConsumer(ctx, src.stream, cfg)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src.stream, err)
	}
	pending := uint64(500)
	if !following {
		info, err := cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("reading %s: %w", src.stream, err)
		}
		if pending = info.NumPending; pending == 0 {
			return nil
		}
	}
	for {
		// Reading history, ask for no more than is left, so the fetch returns at once.
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		batch, err := cons.Fetch(int(min(pending, 500)), jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() != nil && following {
				return nil
			}
			return fmt.Errorf("reading %s: %w", src.stream, err)
		}
		n, done := 0, false
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				cancel()
				return fmt.Errorf("reading %s: %w", src.stream, err)
			}
			s := stored{Stream: src.stream, Seq: meta.Sequence.Stream, Time: meta.Timestamp,
				Msg: &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}}
			if err := fn(s); err != nil {
				cancel()
				return err
			}
			done = meta.NumPending == 0
			if !following {
				pending = max(meta.NumPending, 1)
			}
		}
		err = batch.Error()
		cancel()
		if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("reading %s: %w", src.stream, err)
		}
		if ctx.Err() != nil {
			if following {
				return nil
			}
			return ctx.Err()
		}
		if !following && (done || n == 0) {
			return nil
		}
	}
}
