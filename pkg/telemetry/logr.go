package telemetry

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
)

// Logr adapts a zerolog logger to logr, the interface client-go (klog) and controller-runtime log
// through, so their lines come out as the service's own JSON lines: logr's V(0) is info, every
// higher verbosity debug; names join into a "logger" field.
func Logr(log zerolog.Logger) logr.Logger { return logr.New(&zerologSink{log: log}) }

type zerologSink struct {
	log  zerolog.Logger
	name string
}

func (s *zerologSink) Init(logr.RuntimeInfo) {}

func (s *zerologSink) Enabled(level int) bool {
	if level > 0 {
		return s.log.GetLevel() <= zerolog.DebugLevel
	}
	return s.log.GetLevel() <= zerolog.InfoLevel
}

func (s *zerologSink) Info(level int, msg string, kv ...any) {
	ev := s.log.Info()
	if level > 0 {
		ev = s.log.Debug()
	}
	s.emit(ev, msg, kv)
}

func (s *zerologSink) Error(err error, msg string, kv ...any) {
	s.emit(s.log.Error().Err(err), msg, kv)
}

func (s *zerologSink) emit(ev *zerolog.Event, msg string, kv []any) {
	if s.name != "" {
		ev = ev.Str("logger", s.name)
	}
	ev.Fields(fields(kv)).Msg(msg)
}

func (s *zerologSink) WithValues(kv ...any) logr.LogSink {
	return &zerologSink{log: s.log.With().Fields(fields(kv)).Logger(), name: s.name}
}

func (s *zerologSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return &zerologSink{log: s.log, name: name}
}

// fields turns logr's alternating keys and values into zerolog fields; a key that is not a
// string is printed, a value missing at the end is empty.
func fields(kv []any) map[string]any {
	out := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		var v any
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		if st, ok := v.(fmt.Stringer); ok {
			v = st.String()
		}
		out[strings.TrimSpace(key)] = v
	}
	return out
}
