package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	nodesv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/nodes/v1"
)

// busEnv is a NATS server with Fleetwright's streams, and the CLI's environment pointing at it.
func busEnv(t *testing.T) (*bus.Conn, string) {
	t.Helper()
	srv := bustest.RunServer(t)
	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.EnsureStreams(ctx))
	t.Setenv("FLEETWRIGHT_STATE", t.TempDir())
	t.Setenv("NATS_URL", srv.ClientURL())
	for _, k := range []string{"NATS_USER", "NATS_PASSWORD", "NATS_PASSWORD_FILE", "NATS_CREDS", "NATS_TLS_CA", "FLEETWRIGHT_PREFIX"} {
		t.Setenv(k, "")
	}
	return conn, srv.ClientURL()
}

func cli(t *testing.T, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut syncBuffer
	code := runContext(ctx, args, &out, &errOut)
	return strings.Join(out.lines(), "\n"), strings.Join(errOut.lines(), "\n"), code
}

// tap --since replays what the work streams stored, oldest first, with stream and sequence,
// then (without --no-follow) follows what comes next.
func TestTapSinceReplaysHistoryThenFollows(t *testing.T) {
	conn, _ := busEnv(t)
	ctx := context.Background()
	p := conn.Prefix()
	require.NoError(t, conn.Publish(ctx, p.Of(subject.LaunchIntents), &launchv1.LaunchIntent{NodeClaimName: "default-a"}, "default-a"))
	require.NoError(t, conn.Publish(ctx, p.Of(subject.NodesEvents), &nodesv1.NodeEvent{NodeName: "node-a", NodeClaimName: "default-a"}, ""))

	out, stderr, code := cli(t, ctx, "tap", "--since", "1h", "--no-follow")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(out, "\n")
	require.Len(t, lines, 2, out)
	var first, second Line
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	assert.Equal(t, "fleetwright.launch.intents", first.Subject)
	assert.Equal(t, "FLEETWRIGHT_LAUNCH", first.Stream)
	assert.Equal(t, uint64(1), first.Seq)
	assert.JSONEq(t, `{"nodeClaimName":"default-a"}`, string(first.Payload))
	assert.Equal(t, "FLEETWRIGHT_NODES", second.Stream)

	// Nothing stored in the window: nothing printed.
	out, _, code = cli(t, ctx, "tap", "--since", "1h", "--no-follow", "--subject", "fleetwright.terminations.>")
	require.Equal(t, 0, code)
	assert.Empty(t, out)

	// Following: the history, then a message published afterwards.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fout, ferr syncBuffer
	done := make(chan int, 1)
	go func() { done <- runContext(fctx, []string{"tap", "--since", "1h"}, &fout, &ferr) }()
	require.Eventually(t, func() bool { return len(fout.lines()) == 2 }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, conn.Publish(ctx, p.Of(subject.LaunchIntents), &launchv1.LaunchIntent{NodeClaimName: "default-b"}, "default-b"))
	require.Eventually(t, func() bool { return len(fout.lines()) == 3 }, 10*time.Second, 20*time.Millisecond)
	assert.Contains(t, fout.lines()[2], "default-b")
	cancel()
	require.Equal(t, 0, <-done, ferr.lines())

	_, stderr, code = cli(t, ctx, "tap", "--no-follow")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "give --since too")
}

// Where the audit stream exists (deploy/ makes it), history is read from it.
func TestHistoryPrefersTheAuditStream(t *testing.T) {
	conn, _ := busEnv(t)
	ctx := context.Background()
	p := conn.Prefix()
	var sources []*jetstream.StreamSource
	for _, key := range subject.Streams() {
		sources = append(sources, &jetstream.StreamSource{Name: p.Stream(key)})
	}
	_, err := conn.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "FLEETWRIGHT_AUDIT", Sources: sources})
	require.NoError(t, err)
	require.NoError(t, conn.Publish(ctx, p.Of(subject.LaunchIntents), &launchv1.LaunchIntent{NodeClaimName: "default-a"}, "default-a"))
	require.Eventually(t, func() bool {
		out, _, code := cli(t, ctx, "tap", "--since", "1h", "--no-follow")
		return code == 0 && strings.Contains(out, `"stream":"FLEETWRIGHT_AUDIT"`) && strings.Contains(out, "default-a")
	}, 10*time.Second, 50*time.Millisecond, "the replay comes from the audit stream")
	out, _, code := cli(t, ctx, "tap", "--since", "1h", "--no-follow", "--stream", "FLEETWRIGHT_LAUNCH")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"stream":"FLEETWRIGHT_LAUNCH"`, "--stream picks the stream")
}

// deadletters ls shows each stored dead letter with its error; replay sends it back to its
// original subject without the dead-letter headers, once.
func TestDeadLettersListAndReplay(t *testing.T) {
	conn, _ := busEnv(t)
	ctx := context.Background()
	p := conn.Prefix()
	intent := &launchv1.LaunchIntent{NodeClaimName: "default-dl"}
	data, err := proto.Marshal(intent)
	require.NoError(t, err)
	dl := nats.NewMsg(p.DeadLetter(p.Of(subject.LaunchIntents)))
	dl.Data = data
	dl.Header.Set(bus.HeaderType, "fleetwright.launch.v1.LaunchIntent")
	dl.Header.Set(bus.HeaderError, "creating fleet: throttled")
	dl.Header.Set(bus.HeaderOriginalSubject, p.Of(subject.LaunchIntents))
	dl.Header.Set(bus.HeaderOriginalMsgID, "default-dl")
	dl.Header.Set(bus.HeaderDeliveries, "5")
	dl.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	_, err = conn.JetStream().PublishMsg(ctx, dl)
	require.NoError(t, err)

	out, stderr, code := cli(t, ctx, "deadletters", "ls")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "FLEETWRIGHT_DEADLETTER #1  fleetwright.launch.intents")
	assert.Contains(t, out, "creating fleet: throttled")
	out, _, code = cli(t, ctx, "deadletters", "ls", "-o", "json")
	require.Equal(t, 0, code)
	var listed []DeadLetter
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed, 1)
	assert.Equal(t, "default-dl", listed[0].MsgID)

	sub, err := conn.NATS().SubscribeSync(p.Of(subject.LaunchIntents))
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, conn.NATS().Flush())
	out, stderr, code = cli(t, ctx, "deadletters", "replay", "1")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "replayed FLEETWRIGHT_DEADLETTER #1 to fleetwright.launch.intents")
	got, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, data, got.Data)
	assert.Empty(t, got.Header.Get(bus.HeaderError))
	assert.Empty(t, got.Header.Get(bus.HeaderOriginalSubject))
	assert.Equal(t, "fleetwright.launch.v1.LaunchIntent", got.Header.Get(bus.HeaderType))
	assert.NotEmpty(t, got.Header.Get("traceparent"), "the trace goes on")

	out, _, code = cli(t, ctx, "deadletters", "replay", "1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "already replayed", "a second replay is dropped by JetStream's dedup")

	_, stderr, code = cli(t, ctx, "deadletters", "replay", "x")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `"x" is not a sequence number`)
	_, stderr, code = cli(t, ctx, "deadletters", "replay", "99")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "#99")
}

// Issue 31, item 4: replay refuses a dead letter older than --max-age (default an hour: the
// DEADLETTER stream keeps a week) and says so, unless --force; --all replays the others.
func TestDeadLettersReplayRefusesStaleOnesUnlessForced(t *testing.T) {
	conn, _ := busEnv(t)
	ctx := context.Background()
	p := conn.Prefix()
	for _, name := range []string{"default-old1", "default-old2"} {
		data, err := proto.Marshal(&launchv1.LaunchIntent{NodeClaimName: name, NodeClaimUid: "uid-" + name})
		require.NoError(t, err)
		dl := nats.NewMsg(p.DeadLetter(p.Of(subject.LaunchIntents)))
		dl.Data = data
		dl.Header.Set(bus.HeaderType, "fleetwright.launch.v1.LaunchIntent")
		dl.Header.Set(bus.HeaderError, "creating fleet: throttled")
		dl.Header.Set(bus.HeaderOriginalSubject, p.Of(subject.LaunchIntents))
		_, err = conn.JetStream().PublishMsg(ctx, dl)
		require.NoError(t, err)
	}
	sub, err := conn.NATS().SubscribeSync(p.Of(subject.LaunchIntents))
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, conn.NATS().Flush())

	// Anything stored is older than a nanosecond: as a week-old letter is older than the hour.
	out, stderr, code := cli(t, ctx, "deadletters", "replay", "--all", "--max-age", "1ns")
	assert.Equal(t, 1, code, "refusing is a failure scripts see")
	assert.NotContains(t, out, "replayed")
	assert.Contains(t, stderr, "refused FLEETWRIGHT_DEADLETTER #1")
	assert.Contains(t, stderr, "refused FLEETWRIGHT_DEADLETTER #2")
	assert.Contains(t, stderr, "--force")
	_, err = sub.NextMsg(300 * time.Millisecond)
	assert.ErrorIs(t, err, nats.ErrTimeout, "nothing was published")

	out, stderr, code = cli(t, ctx, "deadletters", "replay", "--max-age", "1ns", "--force", "2")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "replayed FLEETWRIGHT_DEADLETTER #2")
	_, err = sub.NextMsg(5 * time.Second)
	assert.NoError(t, err, "forced: replayed")

	out, stderr, code = cli(t, ctx, "deadletters", "replay", "--all")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "replayed FLEETWRIGHT_DEADLETTER #1", "within the default hour: replayed")
}

func TestExplanationsPerPool(t *testing.T) {
	tests := []struct {
		in   string
		want []PoolExplanation
	}{
		{"no NodePool exists, and no existing node can take it", []PoolExplanation{{Why: "no NodePool exists, and no existing node can take it"}}},
		{"incompatible with nodepool a: did not tolerate x=y:NoSchedule; incompatible with nodepool b: no zone and capacity type both allow (pod: zone In [z]; nodepool: zone In [w])",
			[]PoolExplanation{{NodePool: "a", Why: "did not tolerate x=y:NoSchedule"}, {NodePool: "b", Why: "no zone and capacity type both allow (pod: zone In [z]; nodepool: zone In [w])"}}},
		{"incompatible with nodepool a: did not tolerate t; nodepool c is not ready: no subnet",
			[]PoolExplanation{{NodePool: "a", Why: "did not tolerate t"}, {NodePool: "c", Why: "is not ready: no subnet"}}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, explanations(tt.in), tt.in)
	}
}

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"why"}, "why what?"},
		{[]string{"why", "pod", "no-namespace"}, "want NAMESPACE/NAME"},
		{[]string{"why", "node"}, "takes one name"},
		{[]string{"simulate"}, "needs -f FILE"},
		{[]string{"deadletters", "rm"}, "want ls or replay"},
	} {
		_, stderr, code := cli(t, ctx, tc.args...)
		assert.Equal(t, 2, code, tc.args)
		assert.Contains(t, stderr, tc.want, tc.args)
	}
}

func TestWorkloadPods(t *testing.T) {
	pods, err := workloadPods([]byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: pause, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: one, namespace: other}
spec:
  containers: [{name: c, image: pause}]
`), "team")
	require.NoError(t, err)
	require.Len(t, pods, 4)
	assert.Equal(t, "team/web-0", pods[0].Namespace+"/"+pods[0].Name)
	assert.Equal(t, "other/one", pods[3].Namespace+"/"+pods[3].Name)
	assert.NotEqual(t, pods[0].UID, pods[1].UID)

	_, err = workloadPods([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"), "default")
	require.ErrorContains(t, err, "not a workload the simulation understands")
	_, err = workloadPods([]byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\n"), "default")
	require.ErrorContains(t, err, "DaemonSet")
	_, err = workloadPods([]byte(""), "default")
	require.ErrorContains(t, err, "makes no pod")
}

// A message's traceparent gives the trace id, and --jaeger-url a link to it; an invalid or
// absent traceparent gives neither.
func TestTraceIDAndLink(t *testing.T) {
	msg := func(tp string) stored {
		m := nats.NewMsg("x")
		if tp != "" {
			m.Header.Set("traceparent", tp)
		}
		return stored{Msg: m}
	}
	id := msg("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").traceID()
	assert.Equal(t, "0af7651916cd43dd8448eb211c80319c", id)
	assert.Empty(t, msg("00-00000000000000000000000000000000-b7ad6b7169203331-01").traceID())
	assert.Empty(t, msg("garbage").traceID())
	assert.Empty(t, msg("").traceID())
	o := options{jaegerURL: "http://jaeger:16686/"}
	assert.Equal(t, "http://jaeger:16686/trace/"+id, o.traceURL(id))
	assert.Empty(t, o.traceURL(""))
	assert.Empty(t, (&options{}).traceURL(id), "no --jaeger-url, no link")
}
