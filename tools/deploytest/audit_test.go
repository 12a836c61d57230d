package deploytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/subject"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// TestAuditStreamCapturesEverything creates the shipped audit stream (audit-stream.json) as the
// audit user, next to the work streams the services ensure, and checks that messages published
// on different work subjects all land in it, with a retention bound.
func TestAuditStreamCapturesEverything(t *testing.T) {
	serverURL, pw := shippedServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := &bustest.Buffer{}
	pod := busAs(t, ctx, serverURL, "pod-watcher", pw["pod-watcher"], logs)
	busAs(t, ctx, serverURL, "launcher", pw["launcher"], logs)
	busAs(t, ctx, serverURL, "terminator", pw["terminator"], logs)
	sched := busAs(t, ctx, serverURL, "scheduler", pw["scheduler"], logs)

	b, err := os.ReadFile(filepath.Join(natsDir(t), "audit-stream.json"))
	require.NoError(t, err)
	var cfg jetstream.StreamConfig
	require.NoError(t, json.Unmarshal(b, &cfg))
	require.Equal(t, AuditStream(subject.DefaultPrefix), cfg.Name)
	require.Equal(t, jetstream.LimitsPolicy, cfg.Retention)
	require.Equal(t, 30*24*time.Hour, cfg.MaxAge, "a retention policy")
	require.Positive(t, cfg.MaxBytes)
	require.Len(t, cfg.Sources, len(subject.Streams()), "sources every work stream")
	cfg.Replicas = 1 // a single test server

	audit, _ := connectAs(t, serverURL, "audit", pw["audit"])
	js, err := jetstream.New(audit)
	require.NoError(t, err)
	stream, err := js.CreateStream(ctx, cfg)
	require.NoError(t, err, "the audit user creates the audit stream")

	p := subject.DefaultPrefix
	require.NoError(t, pod.Publish(ctx, p.Of(subject.PodsPending), &podsv1.PendingPodBatch{BatchId: "a1"}, "a1"))
	require.NoError(t, sched.Publish(ctx, p.DeadLetter(p.Of(subject.PodsPending)), &podsv1.PendingPodBatch{BatchId: "a2"}, "a2"))
	require.Eventually(t, func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == 2
	}, 10*time.Second, 50*time.Millisecond, "both messages reach the audit stream")
	var subjects []string
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		subjects = append(subjects, m.Subject)
	}
	require.ElementsMatch(t, []string{p.Of(subject.PodsPending), p.DeadLetter(p.Of(subject.PodsPending))}, subjects, "original subjects are kept")

	// No service may touch the audit stream.
	sjs := sched.JetStream()
	denied, cancelDenied := context.WithTimeout(ctx, 2*time.Second)
	defer cancelDenied()
	_, err = sjs.UpdateStream(denied, jetstream.StreamConfig{Name: cfg.Name, Sources: cfg.Sources, MaxAge: time.Minute})
	require.Error(t, err, "a service cannot shorten the audit trail")
}
