package main

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

func deployment(ns, name string, replicas int32, cpu string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
			}},
		},
	}
}

// Unschedulable pods are published as one batch with their projection; pods nominated to an
// existing NodeClaim are not offered again; a DaemonSet's pods never are.
func TestWatcherPublishesPendingPodsInBatches(t *testing.T) {
	ns := "watcher-test"
	ctx, c, client, cons := startWatcher(t, ns, "--resync", "4s")

	_, err := client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "inflate", 3, "1"), metav1.CreateOptions{})
	require.NoError(t, err)
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "pause"}}}},
	}}
	_, err = client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)

	batch := nextBatch(t, ctx, cons)
	require.Len(t, batch.Pods, 3, "the three inflate pods, in one batch")
	for _, p := range batch.Pods {
		assert.Equal(t, ns, p.Namespace)
		assert.Equal(t, int64(1000), p.Requests.Quantities["cpu"])
		assert.Equal(t, "ReplicaSet", p.Owner.GetKind())
	}
	assert.Equal(t, "w1", batch.WatcherId)
	assert.NotEmpty(t, batch.BatchId)

	// Nominate one pod to an existing NodeClaim: later batches leave it out.
	nominated := batch.Pods[0]
	createNodeClaim(t, ctx, c.Kubeconfig, "claim-a")
	nominate(t, ctx, c.Kubeconfig, "claim-a", time.Now().UTC().Truncate(time.Second), nominated)

	// The resync offers the still-pending pods again, without the nominated one.
	require.Eventually(t, func() bool {
		b := nextBatch(t, ctx, cons)
		return len(b.Pods) == 2 && !containsPod(b, nominated.Uid)
	}, time.Minute, 10*time.Millisecond, "resync batches offer the two un-nominated pods only")

	// The NodeClaim goes away: the nominated pod is offered again.
	deleteNodeClaim(t, ctx, client, c.Kubeconfig, "claim-a")
	require.Eventually(t, func() bool {
		return containsPod(nextBatch(t, ctx, cons), nominated.Uid)
	}, time.Minute, 10*time.Millisecond, "a pod whose NodeClaim is gone is pending again")
}

// startWatcher runs pod-watcher in-process against the shared control plane and its own NATS
// server (300 ms idle / 3 s max windows, plus extra flags), makes the test's namespace, and
// returns a consumer of the batches; the watcher stops when the test ends.
func startWatcher(t *testing.T, ns string, extra ...string) (context.Context, *localcluster.Cluster, kubernetes.Interface, jetstream.Consumer) {
	t.Helper()
	return startWatcherOn(t, bustest.RunServer(t), ns, extra...)
}

// startWatcherOn is startWatcher with the NATS server given.
func startWatcherOn(t *testing.T, srv *server.Server, ns string, extra ...string) (context.Context, *localcluster.Cluster, kubernetes.Interface, jetstream.Consumer) {
	t.Helper()
	c := e2e.Cluster(t)
	client, err := c.Client()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	done := make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	args := append([]string{"--nats-url", srv.ClientURL(), "--kubeconfig", c.Kubeconfig, "--admin-addr", "127.0.0.1:0",
		"--batch-idle", "300ms", "--batch-max", "3s", "--watcher-id", "w1"}, extra...)
	go func() { done <- run(wctx, args) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	_, cons := consumer(t, ctx, srv.ClientURL())
	return ctx, c, client, cons
}

func containsPod(b *podsv1.PendingPodBatch, uid string) bool {
	for _, p := range b.Pods {
		if p.Uid == uid {
			return true
		}
	}
	return false
}

func consumer(t *testing.T, ctx context.Context, url string) (jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	nc := natsConnect(t, url)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var cons jetstream.Consumer
	require.Eventually(t, func() bool {
		cons, err = js.CreateOrUpdateConsumer(ctx, "FLEETWRIGHT_PODS", jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the watcher ensures the PODS stream")
	return js, cons
}

func nextBatch(t *testing.T, ctx context.Context, cons jetstream.Consumer) *podsv1.PendingPodBatch {
	t.Helper()
	msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
	require.NoError(t, err, "a batch is published")
	require.NoError(t, msg.Ack())
	var b podsv1.PendingPodBatch
	require.NoError(t, proto.Unmarshal(msg.Data(), &b))
	assert.Equal(t, b.BatchId, msg.Headers().Get("Nats-Msg-Id"), "the batch id is the dedup id")
	sort.Slice(b.Pods, func(i, j int) bool { return b.Pods[i].Uid < b.Pods[j].Uid })
	return &b
}

// Issue 17: a nomination is a hint with an end. A pod nominated to a claim whose node is ready
// but that is still pending after the grace is offered again; so is one nominated to a claim
// that is being deleted. The resync is ten minutes, so only the nomination rule can offer them.
func TestWatcherEndsNominations(t *testing.T) {
	ns := "nomination-test"
	ctx, c, client, cons := startWatcher(t, ns, "--resync", "10m", "--nomination-grace", "2s")

	_, err := client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "held", 2, "1"), metav1.CreateOptions{})
	require.NoError(t, err)
	batch := nextBatchIn(t, ctx, cons, ns)
	require.Len(t, batch.Pods, 2)
	ready, deleting := batch.Pods[0], batch.Pods[1]

	createNodeClaim(t, ctx, c.Kubeconfig, "claim-ready")
	createNodeClaim(t, ctx, c.Kubeconfig, "claim-deleting")
	now := time.Now().UTC().Truncate(time.Second)
	nominate(t, ctx, c.Kubeconfig, "claim-ready", now, ready)
	nominate(t, ctx, c.Kubeconfig, "claim-deleting", now, deleting)
	// Both claims in flight: neither pod is offered (a batch would arrive within the window).
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(3 * time.Second))
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
			break
		}
		require.NoError(t, err)
		var b podsv1.PendingPodBatch
		require.NoError(t, proto.Unmarshal(msg.Data(), &b))
		for _, p := range b.Pods {
			require.NotEqual(t, ns, p.Namespace, "nominated pods are not offered while their claims are in flight")
		}
	}

	startDeleting(t, ctx, c.Kubeconfig, "claim-deleting")
	b := nextBatchIn(t, ctx, cons, ns)
	require.Len(t, b.Pods, 1)
	assert.Equal(t, deleting.Uid, b.Pods[0].Uid, "a pod nominated to a claim being deleted is offered again")

	markInitialized(t, ctx, c.Kubeconfig, "claim-ready", "node-ready")
	b = nextBatchIn(t, ctx, cons, ns)
	assert.True(t, containsPod(b, ready.Uid), "the pod still pending after its claim's node was ready for the grace is offered again")
}

// nextBatchIn returns the next batch with pods of the namespace, only those pods (the tests of
// this package share one control plane).
func nextBatchIn(t *testing.T, ctx context.Context, cons jetstream.Consumer, ns string) *podsv1.PendingPodBatch {
	t.Helper()
	for {
		b := nextBatch(t, ctx, cons)
		var pods []*podsv1.PodProjection
		for _, p := range b.Pods {
			if p.Namespace == ns {
				pods = append(pods, p)
			}
		}
		if len(pods) > 0 {
			b.Pods = pods
			return b
		}
	}
}

// Issue 13: a window of more pods than one NATS message holds is published as several
// batches, none over the server's max_payload, together holding every pod of the window once.
func TestWatcherSplitsAWindowThatDoesNotFitOneMessage(t *testing.T) {
	ns := "split-test"
	const maxPayload = 8 << 10
	srv := bustest.RunServerWith(t, func(o *server.Options) { o.MaxPayload = maxPayload })
	ctx, _, client, cons := startWatcherOn(t, srv, ns, "--batch-idle", "2s", "--batch-max", "20s", "--resync", "10m")

	const pods = 120
	_, err := client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "wide", pods, "100m"), metav1.CreateOptions{})
	require.NoError(t, err)
	type window struct{ open, close time.Time }
	seen := map[string]int{}
	perWindow := map[window]int{}
	for len(seen) < pods {
		msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		require.NoError(t, err, "batches until every pod was offered (%d so far)", len(seen))
		require.NoError(t, msg.Ack())
		size := len(msg.Data())
		for k, vs := range msg.Headers() {
			for _, v := range vs {
				size += len(k) + len(v) + 4
			}
		}
		assert.LessOrEqual(t, size, maxPayload, "a batch fits in one message")
		var b podsv1.PendingPodBatch
		require.NoError(t, proto.Unmarshal(msg.Data(), &b))
		mine := 0
		for _, p := range b.Pods {
			if p.Namespace == ns {
				seen[p.Uid]++
				mine++
			}
		}
		if mine > 0 {
			perWindow[window{b.WindowOpenTime.AsTime(), b.WindowCloseTime.AsTime()}]++
		}
	}
	for uid, n := range seen {
		assert.Equal(t, 1, n, "pod %s offered once", uid)
	}
	split := false
	for _, n := range perWindow {
		split = split || n > 1
	}
	assert.True(t, split, "a window was split into several batches: %v", perWindow)
}

// A claim deleted outright (no finalizer holds it, so no "being deleted" phase is seen) releases
// its pods at once: they are read off the deleted object, as the cache no longer holds it. The
// offer names the nomination it was released from, so it is not taken for a repeat of the batch
// that planned the claim. The resync is ten minutes, so only the delete can offer it.
func TestPodsOfADeletedClaimAreOfferedAtOnce(t *testing.T) {
	ns := "deleted-claim-test"
	ctx, c, client, cons := startWatcher(t, ns, "--resync", "10m")
	_, err := client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "orphaned", 1, "1"), metav1.CreateOptions{})
	require.NoError(t, err)
	batch := nextBatchIn(t, ctx, cons, ns)
	require.Len(t, batch.Pods, 1)
	pod := batch.Pods[0]

	createNodeClaim(t, ctx, c.Kubeconfig, "claim-deleted")
	at := time.Now().UTC().Truncate(time.Second)
	nominate(t, ctx, c.Kubeconfig, "claim-deleted", at, pod)
	time.Sleep(time.Second) // the watcher sees the nomination before the claim goes
	deleteNodeClaim(t, ctx, client, c.Kubeconfig, "claim-deleted")

	b := nextBatchIn(t, ctx, cons, ns)
	require.Len(t, b.Pods, 1)
	assert.Equal(t, pod.Uid, b.Pods[0].Uid, "offered again once its claim is gone")
	assert.Equal(t, "claim-deleted", b.Pods[0].NominatedNodeClaimName, "released from that nomination")
	assert.NotEqual(t, batch.BatchId, b.BatchId)
}
