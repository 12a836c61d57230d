package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func decodeLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func TestLoggerFieldsAndLevel(t *testing.T) {
	tests := []struct {
		level     string
		wantDebug bool
	}{
		{level: "", wantDebug: false},
		{level: "info", wantDebug: false},
		{level: "DEBUG", wantDebug: true},
		{level: "nonsense", wantDebug: false},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			log := NewLoggerTo(&buf, "launcher", "v1.2.3", tt.level)
			log.Debug().Msg("details")
			log.Info().Str("nodeclaim", "default-abc").Msg("launched")

			lines := decodeLines(t, &buf)
			last := lines[len(lines)-1]
			assert.Equal(t, "launcher", last["service"])
			assert.Equal(t, "v1.2.3", last["version"])
			assert.Equal(t, "launched", last["message"])
			assert.Equal(t, "info", last["level"])
			assert.NotEmpty(t, last["time"])
			assert.NotContains(t, last, "trace_id", "no span, no trace id")
			assert.Equal(t, tt.wantDebug, len(lines) == 2)
		})
	}
}

func TestNewLoggerReadsLogLevel(t *testing.T) {
	t.Setenv("LOG_LEVEL", "warn")
	log := NewLogger("scheduler", "dev")
	assert.Equal(t, "warn", log.GetLevel().String())
}

func TestLoggerAddsTraceIDsInsideSpan(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "work")
	defer span.End()
	sc := span.SpanContext()

	var buf bytes.Buffer
	log := NewLoggerTo(&buf, "terminator", "dev", "info")
	log.Info().Ctx(ctx).Msg("via hook")
	withSpan := WithSpan(ctx, log)
	withSpan.Info().Msg("via WithSpan")
	fromCtx := Logger(log.WithContext(ctx))
	fromCtx.Info().Msg("via Logger(ctx)")
	bound := log.With().Ctx(ctx).Str("nodeclaim", "default-abc").Logger()
	bound.Info().Msg("via a logger bound to ctx")
	log.Info().Ctx(context.Background()).Msg("no span")

	lines := decodeLines(t, &buf)
	require.Len(t, lines, 5)
	for _, l := range lines[:4] {
		assert.Equal(t, sc.TraceID().String(), l["trace_id"], l["message"])
		assert.Equal(t, sc.SpanID().String(), l["span_id"], l["message"])
		assert.Equal(t, "terminator", l["service"])
	}
	assert.NotContains(t, lines[4], "trace_id")
	assert.Equal(t, "default-abc", lines[3]["nodeclaim"], "a bound logger keeps its fields")
}
