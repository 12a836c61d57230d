package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogrWritesTheServicesJSONLines(t *testing.T) {
	var buf bytes.Buffer
	l := Logr(zerolog.New(&buf).Level(zerolog.InfoLevel))
	l.WithName("leaderelection").WithValues("lease", "fleetwright/fleetwright-scheduler").Info("acquired lease", "identity", "s-1")
	l.V(2).Info("too chatty") // debug: filtered at info level
	l.Error(errors.New("boom"), "renewing lease", "attempt", 3)

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &first))
	require.NoError(t, json.Unmarshal(lines[1], &second))
	assert.Equal(t, map[string]any{"level": "info", "logger": "leaderelection", "lease": "fleetwright/fleetwright-scheduler",
		"identity": "s-1", "message": "acquired lease"}, first)
	assert.Equal(t, "error", second["level"])
	assert.Equal(t, "boom", second["error"])
	assert.Equal(t, float64(3), second["attempt"])
	assert.False(t, l.V(1).Enabled())
}
