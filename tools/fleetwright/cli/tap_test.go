package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/proto"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// syncBuffer lets the test read what the tap goroutine writes, line by line.
type syncBuffer struct{ bustest.Buffer }

func (b *syncBuffer) lines() []string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestTapPrintsEveryMessageAndSurvivesBadOnes(t *testing.T) {
	srv := bustest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := subject.Prefix("fwtap")
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	conn, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Prefix: string(prefix),
		Registerer: prometheus.NewRegistry(), TracerProvider: tp})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.EnsureStreams(ctx))

	var out syncBuffer
	tap, err := Start(conn.NATS(), prefix.All(), &out)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- tap.Run(ctx) }()

	// 1. A good message, through JetStream like the services publish it.
	intent := &launchv1.LaunchIntent{NodeClaimName: "default-x7k2p", NodePoolName: "default", Zones: []string{"us-east-1a"}}
	require.NoError(t, conn.Publish(ctx, prefix.Of(subject.LaunchIntents), intent, "default-x7k2p"))
	// 2. A type nobody registered.
	unknown := nats.NewMsg(prefix.Of(subject.NodesEvents))
	unknown.Header.Set(bus.HeaderType, "fleetwright.nope.v1.Mystery")
	unknown.Data = []byte{0x0a, 0x01, 'x'}
	require.NoError(t, conn.NATS().PublishMsg(unknown))
	// 3. A known type with garbage bytes.
	garbage := nats.NewMsg(prefix.Of(subject.LaunchResults))
	garbage.Header.Set(bus.HeaderType, "fleetwright.launch.v1.LaunchResult")
	garbage.Data = []byte{0xff, 0xff, 0xff, 0xff}
	require.NoError(t, conn.NATS().PublishMsg(garbage))
	// 4. The tap is still alive after the bad ones.
	require.NoError(t, conn.Publish(ctx, prefix.Of(subject.LaunchIntents), intent, "default-x7k2p-2"))

	require.Eventually(t, func() bool { return len(out.lines()) == 4 }, 10*time.Second, 10*time.Millisecond)
	var lines []Line
	for _, raw := range out.lines() {
		var l Line
		require.NoError(t, json.Unmarshal([]byte(raw), &l), raw)
		_, err := time.Parse(time.RFC3339Nano, l.Time)
		require.NoError(t, err, "time is RFC 3339")
		lines = append(lines, l)
	}

	good := lines[0]
	assert.Equal(t, "fwtap.launch.intents", good.Subject)
	assert.Equal(t, "fleetwright.launch.v1.LaunchIntent", good.Type)
	assert.Empty(t, good.Error)
	assert.Equal(t, []string{"default-x7k2p"}, good.Headers[bus.HeaderMsgID])
	assert.Contains(t, good.Headers, "traceparent")
	assert.JSONEq(t, `{"nodeClaimName":"default-x7k2p","nodePoolName":"default","zones":["us-east-1a"]}`, string(good.Payload))

	tests := []struct {
		line      Line
		subject   string
		data      []byte
		wantError string
	}{
		{lines[1], "fwtap.nodes.events", unknown.Data, "resolving type fleetwright.nope.v1.Mystery"},
		{lines[2], "fwtap.launch.results", garbage.Data, "decoding fleetwright.launch.v1.LaunchResult"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.subject, tt.line.Subject)
		assert.Contains(t, tt.line.Error, tt.wantError)
		var b64 string
		require.NoError(t, json.Unmarshal(tt.line.Payload, &b64), "payload is a base64 string")
		decoded, err := base64.StdEncoding.DecodeString(b64)
		require.NoError(t, err)
		assert.Equal(t, tt.data, decoded)
	}
	assert.Equal(t, "fleetwright.launch.v1.LaunchIntent", lines[3].Type)
	assert.Empty(t, lines[3].Error)

	cancel()
	require.NoError(t, <-done)
}

func TestDescribe(t *testing.T) {
	at := time.Date(2026, 11, 24, 17, 0, 0, 0, time.UTC)
	good, err := proto.Marshal(&launchv1.LaunchIntent{NodeClaimName: "a"})
	require.NoError(t, err)
	tests := []struct {
		name        string
		fwType      string
		data        []byte
		wantPayload string
		wantError   string
	}{
		{name: "decoded", fwType: "fleetwright.launch.v1.LaunchIntent", data: good, wantPayload: `{"nodeClaimName":"a"}`},
		{name: "empty message", fwType: "fleetwright.launch.v1.LaunchIntent", data: nil, wantPayload: `{}`},
		{name: "well-known type", fwType: "google.protobuf.Empty", data: nil, wantPayload: `{}`},
		{name: "no type header", data: good, wantError: "no Fw-Type header"},
		{name: "unknown type", fwType: "x.Y", data: good, wantError: "resolving type x.Y"},
		{name: "broken bytes", fwType: "fleetwright.launch.v1.LaunchIntent", data: []byte{0xff}, wantError: "decoding fleetwright.launch.v1.LaunchIntent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := nats.NewMsg("fleetwright.launch.intents")
			if tt.fwType != "" {
				msg.Header.Set(bus.HeaderType, tt.fwType)
			}
			msg.Data = tt.data
			l := Describe(msg, at)
			assert.Equal(t, "2026-11-24T17:00:00Z", l.Time)
			if tt.wantError != "" {
				assert.Contains(t, l.Error, tt.wantError)
				want, _ := json.Marshal(base64.StdEncoding.EncodeToString(tt.data))
				assert.JSONEq(t, string(want), string(l.Payload))
				return
			}
			assert.Empty(t, l.Error)
			assert.JSONEq(t, tt.wantPayload, string(l.Payload))
		})
	}
}

// The scheduler's disruption decisions on <prefix>.terminations.decisions read as JSON, enums
// by name: the audit trail of why a node went, or why not.
func TestDescribeDisruptionDecision(t *testing.T) {
	data, err := proto.Marshal(&terminationv1.DisruptionDecision{DecisionId: "uid-a/underutilized/1795539600/abandoned",
		Kind:   terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_ABANDONED,
		Reason: commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED, Action: terminationv1.DisruptionAction_DISRUPTION_ACTION_REPLACE,
		NodeClaimNames: []string{"default-old"}, ReplacementNodeClaimNames: []string{"default-rep"},
		Why: "replacement default-rep failed to launch"})
	require.NoError(t, err)
	msg := nats.NewMsg(subject.DefaultPrefix.Of(subject.TerminationsDecisions))
	msg.Header.Set(bus.HeaderType, "fleetwright.termination.v1.DisruptionDecision")
	msg.Data = data
	l := Describe(msg, time.Date(2026, 11, 24, 17, 0, 0, 0, time.UTC))
	assert.Empty(t, l.Error)
	assert.Equal(t, "fleetwright.terminations.decisions", l.Subject)
	assert.JSONEq(t, `{"decisionId":"uid-a/underutilized/1795539600/abandoned","kind":"DISRUPTION_DECISION_KIND_ABANDONED",
		"reason":"TERMINATION_REASON_UNDERUTILIZED","action":"DISRUPTION_ACTION_REPLACE","nodeClaimNames":["default-old"],
		"replacementNodeClaimNames":["default-rep"],"why":"replacement default-rep failed to launch"}`, string(l.Payload))
}

func TestSharedFlags(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantURL    string
		wantPrefix string
		wantPos    []string
		wantErr    string
	}{
		{name: "defaults", wantURL: "nats://127.0.0.1:4222", wantPrefix: "fleetwright"},
		{name: "env", env: map[string]string{"NATS_URL": "nats://nats:4222", "FLEETWRIGHT_PREFIX": "staging"}, wantURL: "nats://nats:4222", wantPrefix: "staging"},
		{name: "flags win", env: map[string]string{"NATS_URL": "nats://nats:4222"}, args: []string{"--nats-url", "nats://other:4222", "--prefix", "dev"}, wantURL: "nats://other:4222", wantPrefix: "dev"},
		{name: "flags after arguments", args: []string{"node-1", "-o", "json", "--prefix", "dev"}, wantURL: "nats://127.0.0.1:4222", wantPrefix: "dev", wantPos: []string{"node-1"}},
		{name: "bad prefix", args: []string{"--prefix", "a b"}, wantErr: "invalid subject prefix"},
		{name: "bad output", args: []string{"-o", "yaml"}, wantErr: "-o yaml: want text or json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NATS_URL", "")
			t.Setenv("FLEETWRIGHT_PREFIX", "")
			t.Setenv("FLEETWRIGHT_STATE", t.TempDir()) // no .local/env
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var o options
			fs := newFlagSet("test", &o, io.Discard)
			pos, err := parse(fs, &o, tt.args)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantURL, o.NATSURL)
			assert.Equal(t, tt.wantPrefix, o.prefix)
			assert.Equal(t, tt.wantPos, pos)
		})
	}
}

// The local stack's .local/env fills in what the environment does not set.
func TestLocalEnvFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "env"), []byte("export KUBECONFIG=/x/kubeconfig\nexport NATS_URL=nats://127.0.0.1:14222\n"), 0o600))
	t.Setenv("FLEETWRIGHT_STATE", dir)
	t.Setenv("NATS_URL", "")
	t.Setenv("KUBECONFIG", "")
	var o options
	_, err := parse(newFlagSet("test", &o, io.Discard), &o, nil)
	require.NoError(t, err)
	assert.Equal(t, "nats://127.0.0.1:14222", o.NATSURL)
	assert.Equal(t, "/x/kubeconfig", o.kubeconfig)
	t.Setenv("NATS_URL", "nats://from-env:4222")
	_, err = parse(newFlagSet("test", &o, io.Discard), &o, nil)
	require.NoError(t, err)
	assert.Equal(t, "nats://from-env:4222", o.NATSURL, "the environment wins over the file")
}
