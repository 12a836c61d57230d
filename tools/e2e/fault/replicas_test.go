package fault_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// Two replicas of every service, as deploy/ runs them, through a scale-up, a consolidation and
// a spot interruption, with instances that take 30 s to boot (EC2's pace). Mid-way through
// each phase one replica of every service is killed with SIGKILL — the scheduler's leader, the
// terminator replica draining the node — and the phase is finished by the survivors alone; the
// killed replicas come back (as standbys or extra workers) before the next phase.
//
// Who does what with two replicas: the scheduler is active/standby on its Lease (the standby
// takes over once the Lease expires); the launcher's and the terminator's replicas pull from
// the same durable JetStream consumers (a dead replica's unacked messages go to the other),
// and both run the launcher's registration and the terminator's decision loop, whose writes
// are idempotent; pod-watcher's replicas both publish every batch, deduplicated by message id.
//
// Asserted: no NodeClaim ever has two instances (watched all along, and over every instance
// the emulator ever ran at the end), no pod lost (every pod Running after each phase), no
// PodDisruptionBudget violated (watched all along). Reported, not asserted: each service's
// takeover, from the kill to the surviving replica's first piece of that service's work.
func TestFaultTwoReplicasOfEveryService(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{Services: []string{}, BootDelay: 30 * time.Second})
	services := infraWithTerminator()
	infraDumpLogs(t, s, services, 2)
	for _, name := range services {
		for r := 0; r < 2; r++ {
			s.StartReplica(name, e2e.ReplicaOptions{Replica: r})
		}
	}
	s.Leading()
	infraWatch(t, s)
	start := time.Now()
	var took []replicaTakeover

	// Scale-up: inflate (1 CPU each) and web (500m each, under a PodDisruptionBudget); the
	// replicas are killed once the first claims exist, and inflate doubles after that.
	infraScale(t, s, false, 4)
	applyWeb(t, s, 4)
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) > 0 }, 90*time.Second, 10*time.Millisecond, "the scheduler is at work")
	k := replicaKillOneOfEach(t, s, "scale-up", "")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "8")
	infraWaitRunning(t, s, 8, 3*time.Minute)
	webRunning(t, s, 4, time.Minute)
	s.AssertInvariants(t, workload, infraSettle)
	took = append(took, k.takeovers(t, s)...)
	k.restart(t, s)

	// Consolidation: inflate 8 → 2 on a pool that consolidates after 5 s; the replicas are
	// killed once the first node is disrupted. The phase ends when the cluster has shrunk and
	// nothing is being disrupted; consolidation is then turned off so the next phase is alone.
	claimsBefore := len(s.NodeClaims(t))
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":{"disruption":{"consolidateAfter":"5s"}}}`)
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "2")
	node := replicaAwaitTaint(t, s, "", 3*time.Minute)
	k = replicaKillOneOfEach(t, s, "consolidation", node)
	require.Eventually(t, func() bool { return replicaQuiet(t, s) && len(s.NodeClaims(t)) < claimsBefore }, 4*time.Minute, 500*time.Millisecond,
		"the cluster shrinks from %d claims and nothing is left being disrupted", claimsBefore)
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":{"disruption":{"consolidateAfter":"Never"}}}`)
	require.Eventually(t, func() bool { return replicaQuiet(t, s) }, 2*time.Minute, 500*time.Millisecond, "no disruption under way")
	infraWaitRunning(t, s, 2, time.Minute)
	webRunning(t, s, 4, time.Minute)
	s.AssertInvariants(t, workload, infraSettle)
	took = append(took, k.takeovers(t, s)...)
	k.restart(t, s)

	// Spot interruption of the node running most web pods: the replicas are killed once it is
	// tainted, mid-drain; its pods move under the budget and the node goes.
	node, _, instance := busiest(t, s, "app=web")
	require.NoError(t, s.Emu.Interrupt(context.Background(), awsemu.KindSpotInterruption, instance))
	replicaAwaitTaint(t, s, node, time.Minute)
	k = replicaKillOneOfEach(t, s, "interruption", node)
	require.Eventually(t, func() bool {
		_, err := s.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		return err != nil
	}, 3*time.Minute, 200*time.Millisecond, "the interrupted node %s is gone", node)
	webRunning(t, s, 4, 2*time.Minute)
	infraWaitRunning(t, s, 2, time.Minute)
	s.AssertInvariants(t, workload, infraSettle)
	took = append(took, k.takeovers(t, s)...)
	k.restart(t, s)

	replicaOneInstancePerClaim(t, s)
	infraAllReady(t, s, services, 2)
	for _, name := range services {
		var parts []string
		for _, x := range took {
			if x.service == name {
				parts = append(parts, x.String())
			}
		}
		t.Logf("takeover: %s %s", name, strings.Join(parts, ", "))
	}
	infraLogf(t, "two replicas of %v, boot delay 30 s; one of each killed mid-scale-up, mid-consolidation and mid-interruption (the scheduler's leader each time): every pod Running after each phase, one instance per claim, PDB and invariants held; %s in all",
		services, time.Since(start).Round(time.Second))
}

// replicaWork is the log message (its start) that shows a service doing its work: the
// scheduler's standby taking the Lease, pod-watcher publishing a batch, the launcher launching,
// the terminator carrying out an intent.
var replicaWork = map[string][]string{
	"scheduler":   {"acquired lease; scheduling"},
	"pod-watcher": {"found "},
	"launcher":    {"launched nodeclaim"},
	"terminator": {"cordoned node", "deleting nodeclaim", "evicted pod", "node still draining", "drained node",
		"terminated instance", "deleted node", "deleted nodeclaim", "initiating termination for interruption"},
}

// replicaKills is one phase's kills: the replica of each service killed, and when.
type replicaKills struct {
	phase  string
	at     time.Time
	killed map[string]int
}

// replicaKillOneOfEach kills one replica of every service at once: the scheduler's leader (the
// Lease's holder), the terminator replica whose log names node (the one draining it; replica 0
// when none does within a few seconds or node is ""), replica 0 of the others.
func replicaKillOneOfEach(t *testing.T, s *e2e.Stack, phase, node string) replicaKills {
	t.Helper()
	k := replicaKills{phase: phase, killed: map[string]int{"pod-watcher": 0, "launcher": 0, "terminator": 0}}
	k.killed["scheduler"] = replicaLeader(t, s)
	if node != "" {
		deadline := time.Now().Add(5 * time.Second)
	find:
		for time.Now().Before(deadline) {
			for r := 0; r < 2; r++ {
				if strings.Contains(s.Replica("terminator", r).Log(), `"node":"`+node+`"`) {
					k.killed["terminator"] = r
					break find
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	k.at = time.Now()
	for name, r := range k.killed {
		s.Replica(name, r).Kill()
	}
	t.Logf("%s: killed %s", phase, k)
	return k
}

func (k replicaKills) String() string {
	var out []string
	for _, name := range infraWithTerminator() {
		out = append(out, fmt.Sprintf("%s-%d", name, k.killed[name]))
	}
	return strings.Join(out, ", ")
}

// restart starts the killed replicas again, as their containers would be.
func (k replicaKills) restart(t *testing.T, s *e2e.Stack) {
	t.Helper()
	for _, name := range infraWithTerminator() {
		s.StartReplica(name, e2e.ReplicaOptions{Replica: k.killed[name]})
	}
}

// replicaTakeover is how long after the kill a service's surviving replica did its work; zero
// when the phase gave it none to do after the kill.
type replicaTakeover struct {
	service, phase string
	after          time.Duration
}

func (x replicaTakeover) String() string {
	if x.after == 0 {
		return "- (" + x.phase + ": no such work after the kill)"
	}
	return fmt.Sprintf("%s (%s)", x.after.Round(10*time.Millisecond), x.phase)
}

// takeovers reads each survivor's log for its first piece of work after the kill (the
// services' own log times: one clock). The scheduler's standby must have taken over: the
// phase could not have finished without a leader.
func (k replicaKills) takeovers(t *testing.T, s *e2e.Stack) []replicaTakeover {
	t.Helper()
	var out []replicaTakeover
	// A phase may end before the dead leader's Lease expires (an empty node goes in seconds);
	// restarted then, the killed replica would take its own Lease back at once (same pod name)
	// and no standby would have taken over: wait for the standby first.
	standby := s.Replica("scheduler", 1-k.killed["scheduler"])
	require.Eventually(t, func() bool { return !replicaFirstAfter(t, standby.Log(), k.at, replicaWork["scheduler"]).IsZero() },
		time.Minute, 50*time.Millisecond, "%s: the standby scheduler takes the Lease over", k.phase)
	for _, name := range infraWithTerminator() {
		first := replicaFirstAfter(t, s.Replica(name, 1-k.killed[name]).Log(), k.at, replicaWork[name])
		x := replicaTakeover{service: name, phase: k.phase}
		if !first.IsZero() {
			x.after = first.Sub(k.at)
		}
		out = append(out, x)
	}
	return out
}

// replicaFirstAfter is the time of the first log line after since whose message starts with one
// of messages; zero if there is none.
func replicaFirstAfter(t *testing.T, log string, since time.Time, messages []string) time.Time {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		match := false
		for _, m := range messages {
			match = match || strings.Contains(line, `"message":"`+m)
		}
		if !match {
			continue
		}
		var l struct {
			Time time.Time `json:"time"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &l), "log line %q", line)
		if l.Time.After(since) {
			return l.Time
		}
	}
	return time.Time{}
}

// replicaLeader is the scheduler replica holding the Lease (its holder is its pod name,
// scheduler-<replica>).
func replicaLeader(t *testing.T, s *e2e.Stack) int {
	t.Helper()
	var r int
	require.Eventually(t, func() bool {
		lease, err := s.Kube.CoordinationV1().Leases("fleetwright").Get(context.Background(), "fleetwright-scheduler", metav1.GetOptions{})
		if err != nil {
			return false
		}
		n, err := strconv.Atoi(strings.TrimPrefix(aws.ToString(lease.Spec.HolderIdentity), "scheduler-"))
		if err != nil || s.Replica("scheduler", n) == nil || !s.Replica("scheduler", n).Running() {
			return false
		}
		r = n
		return true
	}, time.Minute, 50*time.Millisecond, "a running scheduler replica holds the Lease")
	return r
}

// replicaAwaitTaint waits until node (any node when "") is tainted karpenter.sh/disrupted, and
// returns it.
func replicaAwaitTaint(t *testing.T, s *e2e.Stack, node string, within time.Duration) string {
	t.Helper()
	var found string
	require.Eventually(t, func() bool {
		nodes, err := s.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for i := range nodes.Items {
			if n := &nodes.Items[i]; (node == "" || n.Name == node) && infraTainted(n) {
				found = n.Name
				return true
			}
		}
		return false
	}, within, 50*time.Millisecond, "node %q disrupted", node)
	return found
}

// replicaQuiet reports whether nothing is being disrupted: no NodeClaim being deleted, no node
// tainted, every claim with its node.
func replicaQuiet(t *testing.T, s *e2e.Stack) bool {
	t.Helper()
	for _, c := range s.NodeClaims(t) {
		if c.DeletionTimestamp != nil || c.Status.NodeName == "" {
			return false
		}
	}
	nodes, err := s.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return false
	}
	for i := range nodes.Items {
		if infraTainted(&nodes.Items[i]) {
			return false
		}
	}
	return true
}

// replicaOneInstancePerClaim checks every instance the emulator ran, whatever its state now
// (it lists terminated ones for an hour): no NodeClaim had two (the invariant watch sees only
// live ones, twice a second).
func replicaOneInstancePerClaim(t *testing.T, s *e2e.Stack) {
	t.Helper()
	insts, err := s.Emu.Instances(context.Background())
	require.NoError(t, err)
	perClaim := map[string][]string{}
	for _, i := range insts {
		for _, tag := range i.Tags {
			if tag.Key == ec2v1.TagNodeClaim {
				perClaim[tag.Value] = append(perClaim[tag.Value], i.ID+" ("+i.State+")")
			}
		}
	}
	require.NotEmpty(t, perClaim, "instances were launched for claims")
	for claim, ids := range perClaim {
		assert.Len(t, ids, 1, "claim %s had one instance: %v", claim, ids)
	}
}
