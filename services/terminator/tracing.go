package main

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracer makes the terminator's spans; trace context reaches the executor in the intent's
// NATS headers, so an interruption or a decision and the drain it causes are one trace.
var tracer = otel.Tracer("github.com/fleetwright/fleetwright/services/terminator")

// endSpan records err, if any, and ends the span.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
