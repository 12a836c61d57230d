package service

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
)

// runConfig is a service's configuration as Runner takes it: Common embedded, and a flag of its own.
type runConfig struct {
	Common
	Own string
}

func parseRunConfig(args []string) (runConfig, error) {
	var c runConfig
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.Register(fs, "127.0.0.1:0")
	fs.StringVar(&c.Own, "own", "", "")
	return c, fs.Parse(args)
}

// TestRunnerParsesStartsServesAndShutsDown runs a service through Runner: serve gets the parsed
// configuration and a Runtime with NATS and a Kubernetes client, and the Runtime is shut down
// (its admin port closed) when serve returns. A parse or start failure never reaches serve.
func TestRunnerParsesStartsServesAndShutsDown(t *testing.T) {
	srv := bustest.RunServer(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"--nats-url", srv.ClientURL(), "--kubeconfig", kubeconfig, "--admin-addr", "127.0.0.1:0", "--own", "mine"}

	served := errors.New("served")
	var admin string
	err := Runner("pod-watcher", parseRunConfig, func(_ context.Context, cfg runConfig, rt *Runtime) error {
		assert.Equal(t, "mine", cfg.Own, "serve gets the service's own flags")
		assert.Equal(t, "pod-watcher", rt.Name)
		assert.NotNil(t, rt.Bus, "NATS is connected")
		assert.NotNil(t, rt.Kube, "services run with a Kubernetes client")
		assert.NotNil(t, rt.Events)
		admin = rt.Admin.Addr()
		return served
	})(ctx, args)
	require.ErrorIs(t, err, served, "serve's error is the run's")
	_, err = net.Dial("tcp", admin)
	require.Error(t, err, "the admin port is closed once serve returns")

	calls := 0
	serve := func(context.Context, runConfig, *Runtime) error { calls++; return nil }
	run := Runner("pod-watcher", parseRunConfig, serve)
	err = run(ctx, []string{"--no-such-flag"})
	require.ErrorContains(t, err, "no-such-flag", "a flag that does not parse is the error")
	err = run(ctx, []string{"--nats-url", srv.ClientURL(), "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--admin-addr", "127.0.0.1:0"})
	require.ErrorContains(t, err, "loading kubeconfig", "a runtime that cannot start is the error")
	assert.Zero(t, calls, "serve never runs without a parsed configuration and a started runtime")
}
