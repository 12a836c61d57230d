package bus

import (
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// Header names Fleetwright sets on messages. Nats-Msg-Id is JetStream's own
// de-duplication header.
const (
	// HeaderMsgID is JetStream's de-duplication id.
	HeaderMsgID = nats.MsgIdHdr
	// HeaderType carries the payload's full protobuf message name, e.g.
	// "fleetwright.launch.v1.LaunchIntent", so an auditor can decode it.
	HeaderType = "Fw-Type"
	// HeaderError carries an error: why a message was dead-lettered, or the
	// error a request/reply handler returned.
	HeaderError = "Fw-Error"
	// HeaderOriginalSubject is the subject a dead-lettered message arrived on.
	HeaderOriginalSubject = "Fw-Original-Subject"
	// HeaderOriginalMsgID is the Nats-Msg-Id a dead-lettered message had.
	HeaderOriginalMsgID = "Fw-Original-Msg-Id"
	// HeaderDeliveries is how many times a dead-lettered message was delivered.
	HeaderDeliveries = "Fw-Deliveries"
	// HeaderTruncated, on a dead letter, is the original payload's size in bytes when the
	// payload was cut to fit the server's max payload beside the dead letter's headers.
	HeaderTruncated = "Fw-Truncated"
)

// HeaderCarrier adapts nats.Header to OpenTelemetry's TextMapCarrier, so W3C
// trace context (traceparent, tracestate) and baggage travel in NATS headers.
//
// NATS headers are case-sensitive; the propagator writes lower-case keys, and
// Get falls back to a canonical-case lookup for headers written by others.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get returns the first value for key.
func (c HeaderCarrier) Get(key string) string {
	if v, ok := c[key]; ok && len(v) > 0 {
		return v[0]
	}
	return nats.Header(c).Get(key)
}

// Set replaces the value for key.
func (c HeaderCarrier) Set(key, value string) {
	c[key] = []string{value}
}

// Keys lists the header names present.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
