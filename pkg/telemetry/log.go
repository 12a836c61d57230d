// Package telemetry gives every Fleetwright service the same observability:
// JSON logs with zerolog, OpenTelemetry traces exported over OTLP when the
// standard OTEL_EXPORTER_OTLP_* variables say where, and one admin HTTP port
// serving Prometheus /metrics, /healthz and /readyz.
//
//	log := telemetry.NewLogger("launcher", version)
//	shutdown, err := telemetry.SetupTracing(ctx, "launcher", version)
//	admin := telemetry.NewAdminServer(":8081", prometheus.DefaultGatherer)
//	admin.AddReadiness("nats", conn.Ready)
//	admin.Start()
package telemetry

import (
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// NewLogger returns a JSON logger on stderr with service and version fields,
// at the level named by LOG_LEVEL (trace, debug, info, warn, error; default
// info). Lines written with a context holding a span get its trace_id and span_id: an event
// given one (log.Info().Ctx(ctx)) or a logger bound to one (log.With().Ctx(ctx).Logger()), as
// the services bind theirs inside every span they log in.
func NewLogger(service, version string) zerolog.Logger {
	return NewLoggerTo(os.Stderr, service, version, os.Getenv("LOG_LEVEL"))
}

// NewLoggerTo is NewLogger writing to w at the named level.
func NewLoggerTo(w io.Writer, service, version, level string) zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).
		Level(parseLevel(level)).
		Hook(TraceHook{}).
		With().Timestamp().Str("service", service).Str("version", version).
		Logger()
}

func parseLevel(s string) zerolog.Level {
	lvl, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(s)))
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.InfoLevel
	}
	return lvl
}

// TraceHook adds trace_id and span_id to events logged with a context
// holding a valid span (log.Info().Ctx(ctx)...).
type TraceHook struct{}

// Run implements zerolog.Hook.
func (TraceHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	ctx := e.GetCtx()
	if ctx == nil {
		return
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		e.Str("trace_id", sc.TraceID().String()).Str("span_id", sc.SpanID().String())
	}
}

// WithSpan returns l with trace_id and span_id fields when ctx holds a valid
// span, and l unchanged otherwise.
func WithSpan(ctx context.Context, l zerolog.Logger) zerolog.Logger {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return l
	}
	return l.With().Str("trace_id", sc.TraceID().String()).Str("span_id", sc.SpanID().String()).Logger()
}

// Logger returns the logger stored in ctx (zerolog's l.WithContext), with the
// span's ids added when ctx holds a span. Without a stored logger it returns
// zerolog's default context logger (disabled unless configured).
func Logger(ctx context.Context) zerolog.Logger {
	return WithSpan(ctx, *zerolog.Ctx(ctx))
}
