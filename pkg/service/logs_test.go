package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetwright/fleetwright/pkg/telemetry"
)

// What client-go (klog) and controller-runtime log comes out as the service's own JSON lines,
// never as klog's text or controller-runtime's "log.SetLogger(...) was never called".
func TestLibrariesLogThroughTheServiceLogger(t *testing.T) {
	var out bytes.Buffer
	RouteLogs(telemetry.NewLoggerTo(&out, "launcher", "dev", "info"))
	t.Cleanup(func() { klog.ClearLogger() })

	klog.InfoS("leader elected", "lease", "fleetwright/fleetwright-scheduler")
	klog.ErrorS(errors.New("connection refused"), "watch failed", "resource", "nodes")
	crlog.Log.WithName("client").Info("listing", "kind", "NodeClaim")
	crlog.FromContext(t.Context()).Error(errors.New("conflict"), "update failed")
	klog.Flush()

	text := out.String()
	assert.NotContains(t, text, "SetLogger")
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), "a JSON line: %q", l)
		lines = append(lines, m)
	}
	require.Len(t, lines, 4, text)
	want := []struct{ component, level, msg string }{
		{"client-go", "info", "leader elected"},
		{"client-go", "error", "watch failed"},
		{"controller-runtime", "info", "listing"},
		{"controller-runtime", "error", "update failed"},
	}
	for i, w := range want {
		assert.Equal(t, "launcher", lines[i]["service"])
		assert.Equal(t, w.component, lines[i]["component"], w.msg)
		assert.Equal(t, w.level, lines[i]["level"], w.msg)
		assert.Equal(t, w.msg, lines[i]["message"])
	}
	assert.Equal(t, "fleetwright/fleetwright-scheduler", lines[0]["lease"])
	assert.Equal(t, "connection refused", lines[1]["error"])
	assert.Equal(t, "client", lines[2]["logger"])
	assert.Equal(t, "NodeClaim", lines[2]["kind"])
}
