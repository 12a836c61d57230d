package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a real HTTP endpoint speaking OTLP/HTTP protobuf.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string]string // span name -> service.name
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var export coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans[sp.GetName()] = service
			}
		}
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (r *otlpReceiver) service(span string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.spans[span]
	return s, ok
}

// setupTracing runs SetupTracing for service in an environment whose only OTLP settings are
// endpoint and protocol, and leaves the otel globals inert when the test ends.
func setupTracing(t *testing.T, service, version, endpoint, protocol string) (func(context.Context) error, error) {
	prop := otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(prop)
	})
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
	t.Setenv("OTEL_SERVICE_NAME", "")
	return SetupTracing(context.Background(), service, version)
}

func TestSetupTracingExportsOverOTLPHTTP(t *testing.T) {
	recv := &otlpReceiver{spans: map[string]string{}}
	srv := httptest.NewServer(recv)
	defer srv.Close()

	ctx := context.Background()
	shutdown, err := setupTracing(t, "launcher", "v0.1.0", srv.URL, "")
	require.NoError(t, err)
	_, span := otel.Tracer("test").Start(ctx, "create fleet")
	assert.True(t, span.IsRecording())
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(trace.ContextWithSpan(ctx, span), carrier)
	assert.Contains(t, carrier["traceparent"], span.SpanContext().TraceID().String(), "W3C propagator installed")
	span.End()

	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, shutdown(sctx), "shutdown flushes spans to the receiver")
	service, ok := recv.service("create fleet")
	require.True(t, ok, "span reached the OTLP receiver")
	assert.Equal(t, "launcher", service)

}

func TestSetupTracingWithoutEndpointIsNoop(t *testing.T) {
	shutdown, err := setupTracing(t, "scheduler", "dev", "", "")
	require.NoError(t, err)
	_, span := otel.Tracer("test").Start(context.Background(), "nothing")
	assert.False(t, span.IsRecording(), "no exporter configured: spans are not recorded")
	span.End()
	assert.NoError(t, shutdown(context.Background()))

	// Trace context still flows through: an incoming traceparent is kept.
	in := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), in)
	ctx, child := otel.Tracer("test").Start(ctx, "child")
	defer child.End()
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	assert.Contains(t, out["traceparent"], "4bf92f3577b34da6a3ce929d0e0e4736")
}

func TestSetupTracingRejectsUnknownProtocol(t *testing.T) {
	_, err := setupTracing(t, "scheduler", "dev", "http://127.0.0.1:4318", "http/json")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unsupported OTLP protocol "http/json"`)
}

// A traceparent written from one span's context and read back parents the next span in the
// same trace; an empty or malformed one leaves the context alone.
func TestTraceParentRoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "decide")
	defer span.End()
	parent := TraceParent(ctx)
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, parent)

	_, child := tp.Tracer("t").Start(WithTraceParent(context.Background(), parent), "later")
	defer child.End()
	assert.Equal(t, span.SpanContext().TraceID(), child.SpanContext().TraceID())

	assert.Empty(t, TraceParent(context.Background()), "no span, no traceparent")
	for _, bad := range []string{"", "00-zz-zz-01", "garbage"} {
		_, s := tp.Tracer("t").Start(WithTraceParent(context.Background(), bad), "root")
		assert.NotEqual(t, span.SpanContext().TraceID(), s.SpanContext().TraceID(), bad)
		s.End()
	}
}
