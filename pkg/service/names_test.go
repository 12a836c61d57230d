package service

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseCommon registers the common flags and a service's own (under their new names), and
// parses args as a service does.
func parseCommon(t *testing.T, args ...string) (Common, time.Duration, int) {
	t.Helper()
	var c Common
	var interval time.Duration
	var workers int
	fs := flag.NewFlagSet("terminator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Register(fs, "127.0.0.1:0")
	fs.DurationVar(&interval, "decision-interval", EnvDuration("DECISION_INTERVAL", 30*time.Second), "(env DECISION_INTERVAL)")
	fs.IntVar(&workers, "termination-workers", EnvInt("TERMINATION_WORKERS", 4), "(env TERMINATION_WORKERS)")
	require.NoError(t, c.Parse(fs, args))
	return c, interval, workers
}

// TestOldNamesStillWork: every setting renamed to the one scheme (a flag --x-y reads X_Y;
// Karpenter's names where it has the setting) still takes its old flag and environment
// variable, the new name winning when both are given, and the start log can say which old
// names were used.
func TestOldNamesStillWork(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want func(t *testing.T, c Common, interval time.Duration, workers int)
	}{
		{"old flag --kube-qps", nil, []string{"--kube-qps", "50"}, func(t *testing.T, c Common, _ time.Duration, _ int) {
			assert.Equal(t, 50.0, c.KubeQPS)
		}},
		{"new flag --kube-client-qps", nil, []string{"--kube-client-qps", "60", "--kube-client-burst", "70"}, func(t *testing.T, c Common, _ time.Duration, _ int) {
			assert.Equal(t, 60.0, c.KubeQPS)
			assert.Equal(t, 70, c.KubeBurst)
		}},
		{"old env KUBE_QPS, KUBE_BURST", map[string]string{"KUBE_QPS": "11", "KUBE_BURST": "22"}, nil, func(t *testing.T, c Common, _ time.Duration, _ int) {
			assert.Equal(t, 11.0, c.KubeQPS)
			assert.Equal(t, 22, c.KubeBurst)
		}},
		{"new env wins over old", map[string]string{"KUBE_QPS": "11", "KUBE_CLIENT_QPS": "33"}, nil, func(t *testing.T, c Common, _ time.Duration, _ int) {
			assert.Equal(t, 33.0, c.KubeQPS)
		}},
		{"old env NATS_TLS_CA", map[string]string{"NATS_TLS_CA": "/ca.pem"}, nil, func(t *testing.T, c Common, _ time.Duration, _ int) {
			assert.Equal(t, "/ca.pem", c.NATSCA)
		}},
		{"old flags --interval, --workers", nil, []string{"--interval", "5s", "--workers", "9"}, func(t *testing.T, _ Common, interval time.Duration, workers int) {
			assert.Equal(t, 5*time.Second, interval)
			assert.Equal(t, 9, workers)
		}},
		{"old flag --tls-server-name", nil, []string{"--tls-server-name", "nats.fleetwright.svc"}, func(t *testing.T, c Common, _ time.Duration, _ int) {
			assert.Equal(t, "nats.fleetwright.svc", c.NATSTLSServerName)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"KUBE_QPS", "KUBE_BURST", "KUBE_CLIENT_QPS", "KUBE_CLIENT_BURST", "NATS_TLS_CA", "NATS_CA"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, interval, workers := parseCommon(t, tc.args...)
			tc.want(t, c, interval, workers)
		})
	}
	assert.Contains(t, OldNamesUsed(), "--interval (now --decision-interval)", "the start log names the old flags used")
	assert.Contains(t, OldNamesUsed(), "KUBE_QPS (now KUBE_CLIENT_QPS)", "and the old environment variables")
}

// TestEnvNameScheme: a flag's environment variable is its name in capitals, but for the two
// named by others.
func TestEnvNameScheme(t *testing.T) {
	for flagName, env := range map[string]string{"kube-client-qps": "KUBE_CLIENT_QPS", "decision-interval": "DECISION_INTERVAL",
		"region": "AWS_REGION", "prefix": "FLEETWRIGHT_PREFIX", "nats-tls-server-name": "NATS_TLS_SERVER_NAME"} {
		assert.Equal(t, env, EnvName(flagName), flagName)
	}
	for old, news := range RenamedFlags {
		for _, n := range news {
			assert.NotEqual(t, old, n)
		}
	}
}

// TestUsageShowsVersionAndOldNames: -h starts with the program and its version, lists the
// flags without the aliases, and names the old names it still accepts.
func TestUsageShowsVersionAndOldNames(t *testing.T) {
	var c Common
	var out bytes.Buffer
	fs := flag.NewFlagSet("launcher", flag.ContinueOnError)
	fs.SetOutput(&out)
	c.Register(fs, "127.0.0.1:0")
	fs.Int("launch-workers", 4, "launches in flight (env LAUNCH_WORKERS)")
	require.ErrorIs(t, c.Parse(fs, []string{"-h"}), flag.ErrHelp)
	help := out.String()
	assert.True(t, strings.HasPrefix(help, "launcher dev (commit "), help)
	assert.Contains(t, help, "-launch-workers int")
	assert.Contains(t, help, "-kube-client-qps float")
	assert.NotContains(t, help, "  -workers", "an alias is not listed as a flag of its own")
	assert.Contains(t, help, "Old flag names, still accepted: ")
	assert.Contains(t, help, "--workers (--launch-workers)")
	assert.Contains(t, help, "--kube-qps (--kube-client-qps)")
}

// TestRunnerPrintsVersion: --version prints the version and starts nothing, even when the
// rest of the configuration would not do (no --cluster-name, no NATS).
func TestRunnerPrintsVersion(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	started := false
	err = Runner("launcher", parseRunConfig, func(context.Context, runConfig, *Runtime) error { started = true; return nil })(context.Background(), []string{"--version", "--nats-url", ""})
	os.Stdout = stdout
	require.NoError(t, w.Close())
	out, _ := io.ReadAll(r)
	require.NoError(t, err)
	assert.False(t, started)
	assert.Regexp(t, `^launcher dev \(commit [^,]+, go1\.`, string(out))
}

// TestUnsupportedKarpenterSettingsAreRefused: a Karpenter setting Fleetwright does not act on,
// carried over from Helm values, stops the service at start with its name; at Karpenter's
// default (or unset) it is harmless.
func TestUnsupportedKarpenterSettingsAreRefused(t *testing.T) {
	valid := Common{NATSOptions: NATSOptions{NATSURL: "nats://x"}, AdminAddr: ":1"}
	for k := range UnsupportedKarpenterSettings {
		t.Setenv(k, "")
	}
	require.NoError(t, valid.Validate())
	t.Setenv("RESERVED_ENIS", "0")
	t.Setenv("ISOLATED_VPC", "False")
	require.NoError(t, valid.Validate(), "Karpenter's defaults are harmless")
	t.Setenv("RESERVED_ENIS", "2")
	t.Setenv("MIN_VALUES_POLICY", "BestEffort")
	err := valid.Validate()
	require.Error(t, err)
	assert.ErrorContains(t, err, `MIN_VALUES_POLICY="BestEffort", RESERVED_ENIS="2"`)
	assert.ErrorContains(t, err, "docs/settings.md")
}
