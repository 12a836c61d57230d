package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fleetwright/fleetwright/pkg/bus"

	// Every generated Fleetwright package, so protoregistry.GlobalTypes can
	// resolve any Fw-Type the services publish.
	_ "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	_ "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	_ "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
	_ "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	_ "github.com/fleetwright/fleetwright/proto/gen/fleetwright/nodes/v1"
	_ "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
	_ "github.com/fleetwright/fleetwright/proto/gen/fleetwright/scheduler/v1"
	_ "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"

	// Well-known types, so they resolve too (e.g. in tests and ad-hoc tools).
	_ "google.golang.org/protobuf/types/known/anypb"
	_ "google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/emptypb"
	_ "google.golang.org/protobuf/types/known/structpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"
	_ "google.golang.org/protobuf/types/known/wrapperspb"
)

// Line is one printed message. Payload is the message as protojson, or, when
// it cannot be decoded, the raw bytes as a base64 JSON string next to Error. Time is when the
// tap received it, or, replayed, when the stream stored it.
type Line struct {
	Subject string              `json:"subject"`
	Stream  string              `json:"stream,omitempty"` // replayed: the stream it was read from
	Seq     uint64              `json:"seq,omitempty"`    // and its sequence there
	Time    string              `json:"time"`
	Headers map[string][]string `json:"headers,omitempty"`
	Type    string              `json:"type,omitempty"`
	Payload json.RawMessage     `json:"payload,omitempty"`
	Error   string              `json:"error,omitempty"`
}

// Tap is a plain (non-JetStream) subscription that prints every message it
// sees. Being a core subscription it observes traffic without consuming work.
type Tap struct {
	sub *nats.Subscription
	out io.Writer
	now func() time.Time
}

// Start subscribes to subj on nc and makes sure the server has registered the
// interest before returning, so no message published afterwards is missed.
func Start(nc *nats.Conn, subj string, out io.Writer) (*Tap, error) {
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	// An auditor should rather buffer than drop: lift the default limits.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("setting pending limits: %w", err)
	}
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	return &Tap{sub: sub, out: out, now: time.Now}, nil
}

// Run prints one JSON line per message until ctx ends, then unsubscribes.
// A message that cannot be decoded is printed with an error, never fatal.
func (t *Tap) Run(ctx context.Context) error {
	defer func() { _ = t.sub.Unsubscribe() }()
	enc := json.NewEncoder(t.out)
	enc.SetEscapeHTML(false)
	for {
		msg, err := t.sub.NextMsgWithContext(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, nats.ErrSlowConsumer):
			continue // reported by the connection's error handler; keep going
		case err != nil:
			return fmt.Errorf("reading %s: %w", t.sub.Subject, err)
		}
		if err := enc.Encode(Describe(msg, t.now())); err != nil {
			return fmt.Errorf("writing line: %w", err)
		}
	}
}

// Describe turns one NATS message into a Line, decoding the payload with the
// protobuf type named in its Fw-Type header.
func Describe(msg *nats.Msg, received time.Time) Line {
	l := Line{
		Subject: msg.Subject,
		Time:    received.UTC().Format(time.RFC3339Nano),
		Type:    msg.Header.Get(bus.HeaderType),
	}
	if len(msg.Header) > 0 {
		l.Headers = msg.Header
	}
	payload, err := decodePayload(l.Type, msg.Data)
	if err != nil {
		l.Error = err.Error()
		raw, _ := json.Marshal(base64.StdEncoding.EncodeToString(msg.Data))
		l.Payload = raw
		return l
	}
	l.Payload = payload
	return l
}

func decodePayload(typeName string, data []byte) (json.RawMessage, error) {
	if typeName == "" {
		return nil, fmt.Errorf("no %s header: payload type unknown", bus.HeaderType)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName))
	if err != nil {
		return nil, fmt.Errorf("resolving type %s: %w", typeName, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", typeName, err)
	}
	out, err := protojson.MarshalOptions{Resolver: protoregistry.GlobalTypes}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %s as JSON: %w", typeName, err)
	}
	return out, nil
}
