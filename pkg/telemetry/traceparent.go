package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// TraceAnnotation holds, on a NodeClaim, the W3C traceparent of the span that created it (the
// scheduler's decision), so work on the claim that no message carries (its node registering
// and becoming ready, the terminator taking it in its care) joins the trace of its scale-up.
const TraceAnnotation = "fleetwright.io/traceparent"

// TraceParent is the W3C traceparent of ctx's span; empty when ctx holds none.
func TraceParent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// WithTraceParent returns ctx with the span named by a W3C traceparent as its remote parent, so
// the next span started from it joins that trace; ctx itself when traceparent is empty or
// invalid.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
