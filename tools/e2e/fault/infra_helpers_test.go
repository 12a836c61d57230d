package fault_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// The helpers of infra_test.go, named infra* so they keep clear of the other fault tests of
// this package.

// infraSettle is how long the final invariants may take to hold once a fault is over (pods
// come up, the garbage collector reaps).
const infraSettle = 3 * time.Minute

// infraScale applies the v1 example pool (or the v1alpha5 one when legacy) and inflate, and
// scales inflate to n.
func infraScale(t *testing.T, s *e2e.Stack, legacy bool, n int) {
	t.Helper()
	if legacy {
		s.Apply("deploy/examples/v1alpha5/default.yaml")
	} else {
		s.Apply("deploy/examples/v1/default.yaml")
	}
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", strconv.Itoa(n))
}

// infraRunning counts the live Running pods of inflate, and on which nodes.
func infraRunning(t *testing.T, s *e2e.Stack) (int, map[string]int) {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=inflate"})
	require.NoError(t, err)
	n, on := 0, map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
			on[p.Spec.NodeName]++
		}
	}
	return n, on
}

// infraWaitRunning waits for n inflate pods Running and returns how long that took.
func infraWaitRunning(t *testing.T, s *e2e.Stack, n int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool { got, _ := infraRunning(t, s); return got == n }, within, 200*time.Millisecond, "%d inflate pods Running", n)
	return time.Since(start)
}

// infraNoSpareNode checks that the NodeClaims are the nodes n one-CPU pods need and no more:
// every claim has a node, and without any one of them the others could not hold the pods. A
// claim made twice for the same pods (two schedulers at once) is a spare node, whatever
// kube-scheduler spread onto it.
func infraNoSpareNode(t *testing.T, s *e2e.Stack, n int) {
	t.Helper()
	slots, least := 0, -1
	for _, c := range s.NodeClaims(t) {
		if c.DeletionTimestamp != nil {
			continue
		}
		if !assert.NotEmpty(t, c.Status.NodeName, "claim %s has a node", c.Name) {
			continue
		}
		node, err := s.Kube.CoreV1().Nodes().Get(context.Background(), c.Status.NodeName, metav1.GetOptions{})
		if !assert.NoError(t, err, "node of claim %s", c.Name) {
			continue
		}
		k := int(node.Status.Allocatable.Cpu().MilliValue() / 1000)
		slots += k
		if least < 0 || k < least {
			least = k
		}
	}
	require.GreaterOrEqual(t, slots, n, "the claims' nodes hold the %d pods", n)
	assert.Less(t, slots-least, n, "no claim is spare: %d one-CPU slots for %d pods, the smallest node has %d", slots, n, least)
}

// infraMetric sums the samples of a metric on a service copy's admin /metrics whose labels
// include every one of labels (each `name="value"`).
func infraMetric(t *testing.T, s *e2e.Stack, service string, replica int, metric string, labels ...string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.AdminAddr(service, replica)+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err, "metric line %q", line)
		sum += v
	}
	require.NoError(t, sc.Err())
	return sum
}

// infraReady checks a service copy's /readyz answers 200 within a minute (a service may be
// not ready for a few seconds while a fault heals, e.g. its consumer's NATS server between
// leaders) and stays so for a second.
func infraReady(t *testing.T, s *e2e.Stack, service string, replica int) {
	t.Helper()
	ready := func() bool {
		resp, err := http.Get("http://" + s.AdminAddr(service, replica) + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	assert.Eventually(t, func() bool {
		for i := 0; i < 5; i++ {
			if !ready() {
				return false
			}
			time.Sleep(200 * time.Millisecond)
		}
		return true
	}, time.Minute, 200*time.Millisecond, "%s-%d is ready", service, replica)
}

// infraJetStream connects to the stack's NATS for a test's own publishing and reading.
func infraJetStream(t *testing.T, s *e2e.Stack) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.NATSURL, nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// infraStreamLeader is the index in s.NATS of the server leading a stream's replicas.
func infraStreamLeader(t *testing.T, s *e2e.Stack, js jetstream.JetStream, stream string) int {
	t.Helper()
	var leader string
	require.Eventually(t, func() bool {
		st, err := js.Stream(context.Background(), stream)
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			return false
		}
		leader = info.Cluster.Leader
		return true
	}, 30*time.Second, 100*time.Millisecond, "stream %s has a leader", stream)
	for i, srv := range s.NATS {
		if srv.Name() == leader {
			return i
		}
	}
	t.Fatalf("stream %s's leader %q is none of the stack's servers", stream, leader)
	return -1
}

// infraReplicasCurrent waits until every replica of the stream is current again (a restarted
// node caught up).
func infraReplicasCurrent(t *testing.T, js jetstream.JetStream, stream string, want int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := js.Stream(context.Background(), stream)
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas)+1 != want {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "every replica of %s current", stream)
}

// infraDumpLogs prints the services' logs at the end of the test when FAULT_DUMP_LOGS is set
// (a failing test prints them anyway): to see how a fault was ridden out.
func infraDumpLogs(t *testing.T, s *e2e.Stack, services []string, replicas int) {
	t.Helper()
	if os.Getenv("FAULT_DUMP_LOGS") == "" {
		return
	}
	t.Cleanup(func() {
		for _, name := range services {
			for r := 0; r < replicas; r++ {
				if svc := s.Replica(name, r); svc != nil {
					svc.DumpLog()
				}
			}
		}
	})
}

// infraLogf appends one line of the fault matrix to $FAULT_MATRIX_OUT (when set) and logs it.
func infraLogf(t *testing.T, format string, args ...any) {
	t.Helper()
	line := t.Name() + ": " + fmt.Sprintf(format, args...)
	t.Log(line)
	if out := os.Getenv("FAULT_MATRIX_OUT"); out != "" {
		if f, err := os.OpenFile(filepath.Clean(out), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = f.WriteString(line + "\n")
			_ = f.Close()
		}
	}
}
