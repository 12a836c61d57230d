package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
)

// TestRunNeverPrintsThePassword taps a server that wants a password, given each way the tap
// takes it: the tap prints the messages and where it listens, never the password, and neither
// does a failed connect nor -h.
func TestRunNeverPrintsThePassword(t *testing.T) {
	const pw = "s3cret-pw"
	srv := bustest.RunServerWithPassword(t, "audit", pw)
	addr := srv.Addr().String()
	pwFile := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(pwFile, []byte(pw+"\n"), 0o600))
	t.Setenv("FLEETWRIGHT_STATE", t.TempDir()) // no .local/env
	setEnv := func(env map[string]string) {
		for _, k := range []string{"NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_PASSWORD_FILE", "NATS_CREDS", "NATS_TLS_CA", "FLEETWRIGHT_PREFIX"} {
			t.Setenv(k, env[k])
		}
	}
	pub, err := nats.Connect("nats://"+addr, nats.UserInfo("audit", pw))
	require.NoError(t, err)
	defer pub.Close()

	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"in NATS_URL":                 {env: map[string]string{"NATS_URL": fmt.Sprintf("nats://audit:%s@%s", pw, addr)}},
		"in --nats-url":               {args: []string{"--nats-url", fmt.Sprintf("audit:%s@%s", pw, addr)}},
		"NATS_USER and NATS_PASSWORD": {env: map[string]string{"NATS_URL": addr, "NATS_USER": "audit", "NATS_PASSWORD": pw}},
		"--nats-password-file":        {env: map[string]string{"NATS_URL": addr}, args: []string{"--nats-user", "audit", "--nats-password-file", pwFile}},
	} {
		t.Run(name, func(t *testing.T) {
			setEnv(tc.env)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stdout, stderr := &syncBuffer{}, &syncBuffer{}
			done := make(chan int, 1)
			go func() { done <- runContext(ctx, append([]string{"tap"}, tc.args...), stdout, stderr) }()
			require.Eventually(t, func() bool {
				return pub.Publish("fleetwright.pods.pending", []byte("x")) == nil && len(stdout.lines()) > 0
			}, 10*time.Second, 20*time.Millisecond, "the tap connects as audit and prints messages; stderr: %s", stderr.lines())
			cancel()
			require.Equal(t, 0, <-done)
			out := strings.Join(stderr.lines(), "\n")
			assert.Contains(t, out, "tap: listening on fleetwright.> at nats://")
			assert.NotContains(t, out, pw)
			assert.NotContains(t, strings.Join(stdout.lines(), "\n"), pw)
		})
	}

	setEnv(map[string]string{"NATS_URL": fmt.Sprintf("nats://audit:wrong-%s@%s", pw, addr)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	stderr := &syncBuffer{}
	require.Equal(t, 1, runContext(ctx, []string{"tap"}, &syncBuffer{}, stderr))
	assert.Contains(t, strings.Join(stderr.lines(), "\n"), "Authorization Violation")
	assert.NotContains(t, strings.Join(stderr.lines(), "\n"), pw)

	setEnv(map[string]string{"NATS_URL": fmt.Sprintf("nats://audit:%s@%s", pw, addr), "NATS_PASSWORD": pw})
	help := &syncBuffer{}
	require.Equal(t, 0, runContext(context.Background(), []string{"tap", "-h"}, &syncBuffer{}, help))
	assert.Contains(t, strings.Join(help.lines(), "\n"), "nats://audit:***@")
	assert.NotContains(t, strings.Join(help.lines(), "\n"), pw, "-h")
}
