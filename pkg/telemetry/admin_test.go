package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestAdminServer(t *testing.T) {
	reg := prometheus.NewRegistry()
	launched := prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_test_launches_total", Help: "test"})
	reg.MustRegister(launched)
	launched.Add(3)

	admin := NewAdminServer("127.0.0.1:0", reg)
	var natsUp atomic.Bool
	admin.AddReadiness("informers", func(context.Context) error { return nil })
	admin.AddReadiness("nats", func(context.Context) error {
		if !natsUp.Load() {
			return errors.New("nats connection is RECONNECTING")
		}
		return nil
	})
	require.NoError(t, admin.Start())
	t.Cleanup(func() { assert.NoError(t, admin.Shutdown(context.Background())) })
	base := "http://" + admin.Addr()

	tests := []struct {
		name     string
		path     string
		natsUp   bool
		wantCode int
		wantBody string
	}{
		{"metrics", "/metrics", false, http.StatusOK, "fleetwright_test_launches_total 3"},
		{"healthz while not ready", "/healthz", false, http.StatusOK, "ok"},
		{"readyz names failing check", "/readyz", false, http.StatusServiceUnavailable, "not ready: nats: nats connection is RECONNECTING"},
		{"readyz when all pass", "/readyz", true, http.StatusOK, "ok"},
		{"unknown path", "/nope", true, http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			natsUp.Store(tt.natsUp)
			code, body := get(t, base+tt.path)
			assert.Equal(t, tt.wantCode, code)
			assert.Contains(t, body, tt.wantBody)
		})
	}
}

func TestAdminServerStartFailsOnBusyAddress(t *testing.T) {
	first := NewAdminServer("127.0.0.1:0", prometheus.NewRegistry())
	require.NoError(t, first.Start())
	t.Cleanup(func() { _ = first.Shutdown(context.Background()) })
	second := NewAdminServer(first.Addr(), prometheus.NewRegistry())
	err := second.Start()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "starting admin server")
}
