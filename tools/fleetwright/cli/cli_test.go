package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runContext(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestOldCLIFlagNames: the CLI takes the services' NATS flags and variables (--nats-ca,
// NATS_CA, --nats-creds), and still its own old names (--tls-ca, NATS_TLS_CA, --creds); the
// server name to check the certificate for is --nats-tls-server-name, or --tls-server-name.
func TestOldCLIFlagNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want func(t *testing.T, o options)
	}{
		{"--nats-ca", nil, []string{"--nats-ca", "/ca.pem"}, func(t *testing.T, o options) { assert.Equal(t, "/ca.pem", o.NATSCA) }},
		{"old --tls-ca", nil, []string{"--tls-ca", "/old.pem"}, func(t *testing.T, o options) { assert.Equal(t, "/old.pem", o.NATSCA) }},
		{"old env NATS_TLS_CA", map[string]string{"NATS_TLS_CA": "/env.pem"}, nil, func(t *testing.T, o options) { assert.Equal(t, "/env.pem", o.NATSCA) }},
		{"NATS_CA wins over NATS_TLS_CA", map[string]string{"NATS_TLS_CA": "/old.pem", "NATS_CA": "/new.pem"}, nil,
			func(t *testing.T, o options) { assert.Equal(t, "/new.pem", o.NATSCA) }},
		{"old --creds", nil, []string{"--creds", "/x.creds"}, func(t *testing.T, o options) { assert.Equal(t, "/x.creds", o.NATSCreds) }},
		{"--tls-server-name", nil, []string{"--tls-server-name", "nats.fleetwright.svc"}, func(t *testing.T, o options) {
			assert.Equal(t, "nats.fleetwright.svc", o.NATSTLSServerName)
			assert.Equal(t, "nats.fleetwright.svc", o.BusConfig().TLS.ServerName, "the server name reaches the connection")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FLEETWRIGHT_STATE", t.TempDir())
			for _, k := range []string{"NATS_CA", "NATS_TLS_CA", "NATS_CREDS", "NATS_TLS_SERVER_NAME"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var o options
			_, err := parse(newFlagSet("test", &o, io.Discard), &o, tc.args)
			require.NoError(t, err)
			tc.want(t, o)
		})
	}
}

// TestVersion: `version` prints the program as called and its build.
func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	require.Equal(t, 0, code)
	assert.Regexp(t, `^fleetwright dev \(commit [^,]+, go1\.`, out)
	prog = "kubectl fleetwright"
	t.Cleanup(func() { prog = "fleetwright" })
	_, out, _ = runCLI(t, "version")
	assert.True(t, strings.HasPrefix(out, "kubectl fleetwright dev"), out)
	_, out, _ = runCLI(t, "help")
	assert.Contains(t, out, "usage: kubectl fleetwright COMMAND")
}

// TestComplete: what __complete offers after each prefix.
func TestComplete(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{""}, subcommands[""]},
		{[]string{"w"}, []string{"why"}},
		{[]string{"why", ""}, []string{"node", "nodeclaim", "pod"}},
		{[]string{"why", "node"}, []string{"node", "nodeclaim"}},
		{[]string{"why", "node", "ip-10-0-1-1", ""}, nil},
		{[]string{"deadletters", "r"}, []string{"replay"}},
		{[]string{"deadletters", "replay", "--a"}, []string{"--all"}},
		{[]string{"tap", "--s"}, []string{"--since", "--stream", "--subject"}},
		{[]string{"tap", "--no"}, []string{"--no-follow"}},
		{[]string{"simulate", "--f"}, []string{"--f"}},
		{[]string{"preflight", "--kube"}, []string{"--kubeconfig"}},
		{[]string{"why", "pod", "--nats-tls"}, []string{"--nats-tls-server-name"}},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish", "kubectl"}},
		{[]string{"version", "--"}, nil},
	} {
		code, out, _ := runCLI(t, append([]string{completeCmd}, tc.args...)...)
		require.Equal(t, 0, code)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Equal(t, ":4", lines[len(lines)-1], "cobra's directive: no file names")
		assert.Equal(t, tc.want, nilIfEmpty(lines[:len(lines)-1]), "%q", tc.args)
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestCompletionScripts: each shell's script is valid for that shell (bash -n where bash is)
// and calls back into the CLI; the kubectl helper runs the plugin.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "kubectl"} {
		code, out, errOut := runCLI(t, "completion", shell)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, completeCmd, shell)
	}
	_, out, _ := runCLI(t, "completion", "kubectl")
	assert.Contains(t, out, "exec kubectl-fleetwright __complete \"$@\"")
	code, _, errOut := runCLI(t, "completion", "tcsh")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "want bash, zsh, fish or kubectl")

	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "bash is needed to check the bash script")
	_, script, _ := runCLI(t, "completion", "bash")
	path := filepath.Join(t.TempDir(), "fleetwright.bash")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o600))
	b, err := exec.Command(bash, "-n", path).CombinedOutput()
	require.NoError(t, err, "bash -n: %s", b)
}
