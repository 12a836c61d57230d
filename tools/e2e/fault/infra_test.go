// Package fault_test is issue 13's fault matrix: each TestFault* runs the whole system (its own
// control plane, NATS, the AWS emulator, the services as processes) through one fault and then
// asserts the invariants of tools/e2e/invariants.go — no duplicate instance, no orphaned
// instance after the garbage collector's window, no pod lost, no PodDisruptionBudget violated,
// no node left tainted — both while the fault plays (watched every half second) and at the end.
//
// The tests run in parallel (each has its own stack); `go test -parallel` bounds how many at
// once (GOMAXPROCS by default: two on the 2-core CI machine). Set FAULT_MATRIX_OUT to a file
// to collect one line per fault with its timings.
package fault_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/subject"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

var (
	infraICEWindow = flag.Duration("fault.ice-window", time.Minute,
		"how long every offering answers InsufficientInstanceCapacity in TestFaultInsufficientCapacityEverywhere (the issue asks for a minute)")
	infraStormWindow = flag.Duration("fault.storm-window", 30*time.Second,
		"how long half of all EC2 calls are throttled in TestFaultEC2ThrottlingStorm")
)

// infraWithTerminator is the default services plus the terminator.
func infraWithTerminator() []string {
	return append(append([]string(nil), e2e.Services...), "terminator")
}

// infraWatch checks the invariants every half second until the test ends (those that must hold
// at every instant: no duplicate instance, no orphan past the GC window, no PDB violated) and
// fails the test with what it saw.
func infraWatch(t *testing.T, s *e2e.Stack) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
			v, err := e2e.Violations(cctx, s.Client, s.Emu, e2e.InvariantOptions{GCWindow: 35 * time.Second})
			ccancel()
			if err == nil {
				mu.Lock()
				for _, x := range v {
					seen[x.String()] = true
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for v := range seen {
			t.Errorf("invariant broken while the fault played: %s", v)
		}
	})
}

// infraAllReady checks every copy of the named services answers /readyz 200.
func infraAllReady(t *testing.T, s *e2e.Stack, services []string, replicas int) {
	t.Helper()
	for _, name := range services {
		for r := 0; r < replicas; r++ {
			infraReady(t, s, name, r)
		}
	}
}

// A NATS node restarted during a scale-up: three servers, every stream R3, and the server
// leading the LAUNCH stream (the intents in flight) restarted while the scheduler is at work.
// The services ride it out on the other two; every pod runs, each claim once.
func TestFaultNATSNodeRestartDuringScaleUp(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{NATSCluster: 3})
	infraWatch(t, s)
	infraDumpLogs(t, s, e2e.Services, 1)
	_, js := infraJetStream(t, s)
	launch := subject.DefaultPrefix.Stream(subject.StreamLaunch)
	st, err := js.Stream(context.Background(), launch)
	require.NoError(t, err)
	require.Equal(t, 3, st.CachedInfo().Config.Replicas, "streams are R3")

	start := time.Now()
	infraScale(t, s, false, 6)
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) > 0 }, 90*time.Second, 10*time.Millisecond, "the scheduler is at work")
	leader := infraStreamLeader(t, s, js, launch)
	restartAt := time.Now()
	s.RestartNATS(leader)
	down := time.Since(restartAt)
	running := infraWaitRunning(t, s, 6, 3*time.Minute)
	infraReplicasCurrent(t, js, launch, 3)
	s.AssertInvariants(t, []string{"default"}, infraSettle)
	infraNoSpareNode(t, s, 6)
	infraAllReady(t, s, e2e.Services, 1)
	infraLogf(t, "NATS server %d (LAUNCH leader) restarted (%s) mid-scale-up: 6 pods Running %s after it, %s after the scale-up; invariants held",
		leader, down.Round(time.Millisecond), running.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// A NATS node restarted during an interruption's drain: the server leading the TERMINATIONS
// stream restarted while the interrupted node is being drained (PDB: one pod at a time). The
// drain finishes, the node goes, its pods run elsewhere, the PDB is never broken.
func TestFaultNATSNodeRestartDuringInterruptionDrain(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{NATSCluster: 3, Services: infraWithTerminator()})
	infraWatch(t, s)
	_, js := infraJetStream(t, s)
	infraApplyPDB(t, s)
	infraScale(t, s, true, 5)
	infraWaitRunning(t, s, 5, 3*time.Minute)
	node, id := infraBusiestNode(t, s)

	injected := time.Now()
	require.NoError(t, s.Emu.Interrupt(context.Background(), awsemu.KindSpotInterruption, id))
	require.Eventually(t, func() bool {
		n, err := s.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		return err != nil || infraTainted(n)
	}, time.Minute, 50*time.Millisecond, "the interrupted node is tainted: the drain is under way")
	terminations := subject.DefaultPrefix.Stream(subject.StreamTerminations)
	leader := infraStreamLeader(t, s, js, terminations)
	_, on := infraRunning(t, s)
	draining := on[node] // inflate pods still on the node: the drain is not over
	restartAt := time.Now()
	s.RestartNATS(leader)
	down := time.Since(restartAt)
	require.Eventually(t, func() bool {
		_, err := s.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		return err != nil
	}, 2*time.Minute, 200*time.Millisecond, "the interrupted node is gone")
	gone := time.Since(injected)
	infraWaitRunning(t, s, 5, 2*time.Minute)
	for _, p := range infraPodsOn(t, s) {
		assert.NotEqual(t, node, p, "no pod on the interrupted node")
	}
	infraReplicasCurrent(t, js, terminations, 3)
	s.AssertInvariants(t, []string{"default"}, infraSettle)
	infraAllReady(t, s, infraWithTerminator(), 1)
	infraLogf(t, "NATS server %d (TERMINATIONS leader) restarted (%s) mid-drain (%d pods still on the node): interrupted node gone %s after the warning, 5 pods Running elsewhere; PDB and invariants held",
		leader, down.Round(time.Millisecond), draining, gone.Round(100*time.Millisecond))
}

// An EC2 throttling storm during a scale-up: every second EC2 call (CreateFleet, Describe*,
// CreateTags, TerminateInstances, ...) is RequestLimitExceeded for --fault.storm-window. The
// launcher and terminator retry; nothing launches twice, nothing is orphaned.
func TestFaultEC2ThrottlingStorm(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{Services: infraWithTerminator()})
	infraWatch(t, s)
	ctx := context.Background()
	require.NoError(t, s.Emu.Throttle(ctx, awsemu.Throttle{Service: "ec2", Share: 0.5}))
	start := time.Now()
	infraScale(t, s, false, 6)
	// The pods may come up within the storm (the services retry through it) or after it.
	var during time.Duration
	for end := start.Add(*infraStormWindow); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if n, _ := infraRunning(t, s); n == 6 && during == 0 {
			during = time.Since(start)
		}
	}
	require.NoError(t, s.Emu.Throttle(ctx, awsemu.Throttle{}))
	running := infraWaitRunning(t, s, 6, 3*time.Minute)
	if during > 0 {
		running = during
	} else {
		running += *infraStormWindow
	}
	calls, err := s.Emu.Calls(ctx)
	require.NoError(t, err)
	throttled := map[string]int{}
	for _, c := range calls {
		if c.Throttled {
			throttled[c.Action]++
		}
	}
	// Every second EC2 call is refused, whichever it is: the launches' calls (CreateFleet, its
	// launch template, the lookup of what an earlier delivery launched) take their share, but
	// which of them fall on a refused turn depends on how the services' calls interleave.
	launches := throttled["CreateFleet"] + throttled["CreateLaunchTemplate"] + throttled["DescribeLaunchTemplates"] + throttled["DescribeInstances"]
	assert.NotZero(t, launches, "the storm hit the launches: %v", throttled)
	s.AssertInvariants(t, []string{"default"}, infraSettle)
	infraNoSpareNode(t, s, 6)
	infraAllReady(t, s, infraWithTerminator(), 1)
	infraLogf(t, "EC2 throttled 50%% for %s from the scale-up (throttled calls %v): 6 pods Running %s after the scale-up (within the storm: %v); invariants held",
		*infraStormWindow, throttled, running.Round(100*time.Millisecond), during > 0)
}

// InsufficientInstanceCapacity on every offering for --fault.ice-window (a minute): no
// instance can start; when capacity returns the pods run, on no more nodes than they need,
// and no claim is left without a node. The launcher marks an ICE'd offering unavailable for
// --unavailable-ttl (3 min by default, as Karpenter); the test sets 15 s so the run is not
// three minutes longer.
func TestFaultInsufficientCapacityEverywhere(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{Services: infraWithTerminator(),
		ServiceArgs: map[string][]string{"launcher": {"--unavailable-ttl", "15s"}}})
	infraWatch(t, s)
	ctx := context.Background()
	require.NoError(t, s.Emu.SetCapacity(ctx, awsemu.CapacityRule{Capacity: 0}))
	start := time.Now()
	infraScale(t, s, false, 6)
	require.Eventually(t, func() bool {
		calls, err := s.Emu.Calls(ctx)
		require.NoError(t, err)
		for _, c := range calls {
			if c.Action == "CreateFleet" {
				return true
			}
		}
		return false
	}, 90*time.Second, 100*time.Millisecond, "the launcher tries")
	time.Sleep(max(0, *infraICEWindow-time.Since(start)))
	insts, err := s.Emu.Instances(ctx)
	require.NoError(t, err)
	assert.Empty(t, insts, "no capacity, no instance")
	n, _ := infraRunning(t, s)
	assert.Zero(t, n, "no pod runs without capacity")
	fleets := s.Calls(t, "CreateFleet")

	require.NoError(t, s.Emu.SetCapacity(ctx, awsemu.CapacityRule{Capacity: 100}))
	running := infraWaitRunning(t, s, 6, 3*time.Minute)
	s.AssertInvariants(t, []string{"default"}, infraSettle)
	infraNoSpareNode(t, s, 6)
	infraAllReady(t, s, infraWithTerminator(), 1)
	infraLogf(t, "ICE on every offering for %s (%d CreateFleet calls refused): 6 pods Running %s after capacity returned; invariants held",
		*infraICEWindow, fleets, running.Round(100*time.Millisecond))
}

// Two replicas of every service at once, with the scheduler leader's Lease renewals held back
// (a LeaseDelayProxy in front of the kube-apiserver) during a scale-up, so leadership flips to
// the other replica while batches are being planned. Every pod runs, on exactly the nodes it
// needs: no claim made twice by the two leaders.
func TestFaultTwoReplicasLeaderFlipsDuringScaleUp(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{Services: []string{}})
	infraWatch(t, s)
	services := infraWithTerminator()
	infraDumpLogs(t, s, services, 2)
	proxies := []*e2e.LeaseDelayProxy{e2e.NewLeaseDelayProxy(t, s), e2e.NewLeaseDelayProxy(t, s)}
	for _, name := range services {
		for r := 0; r < 2; r++ {
			o := e2e.ReplicaOptions{Replica: r}
			if name == "scheduler" {
				o.KubeServer = proxies[r].URL
			}
			s.StartReplica(name, o)
			if name == "scheduler" && r == 0 {
				require.Eventually(t, func() bool { return infraHoldsLease(s, 0) }, time.Minute, 50*time.Millisecond, "scheduler-0 holds the Lease")
			}
		}
	}
	s.Leading()
	// scheduler-1 is a standby: it has seen scheduler-0 lead.
	require.Eventually(t, func() bool { return strings.Contains(s.Replica("scheduler", 1).Log(), "standing by") }, time.Minute, 50*time.Millisecond)

	start := time.Now()
	infraScale(t, s, false, 5)
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) > 0 }, 90*time.Second, 10*time.Millisecond, "scheduler-0 is at work")
	held := time.Now()
	proxies[0].Delay(12 * time.Second) // past --renew-deadline (6 s) and --lease-duration (8 s)
	require.Eventually(t, func() bool { return strings.Contains(s.Replica("scheduler", 0).Log(), "not leading; standing by") }, time.Minute, 20*time.Millisecond,
		"scheduler-0 steps down, its renewals held")
	stepped := time.Since(held)
	// The rest of the scale-up arrives while no replica leads, or just as scheduler-1 takes
	// over: its takeover and the new batch meet.
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "9")
	require.Eventually(t, func() bool { return infraHoldsLease(s, 1) }, time.Minute, 50*time.Millisecond, "leadership flips to scheduler-1")
	flipped := time.Since(held)
	proxies[0].Delay(0)
	// Never two leaders at once: scheduler-0 stopped its work before scheduler-1 began. (The
	// services' own log times, one clock: the order of two events, not a duration.)
	stopped := infraLogTime(t, s.Replica("scheduler", 0).Log(), "not leading; standing by")
	began := infraLogTime(t, s.Replica("scheduler", 1).Log(), "acquired lease; scheduling")
	assert.True(t, stopped.Before(began), "scheduler-0 stopped leading (%s) before scheduler-1 began (%s): %s of two leaders",
		stopped.Format(time.StampMilli), began.Format(time.StampMilli), stopped.Sub(began))
	running := infraWaitRunning(t, s, 9, 3*time.Minute)
	s.AssertInvariants(t, []string{"default"}, infraSettle)
	infraNoSpareNode(t, s, 9)
	infraAllReady(t, s, services, 2)
	// A leader stopped on purpose gives the Lease up on its way out (a standby need not wait
	// for it to expire): once scheduler-1 has exited, it no longer holds it.
	_ = s.Replica("scheduler", 1).Stop(15 * time.Second)
	require.False(t, s.Replica("scheduler", 1).Running(), "scheduler-1 stopped")
	lease, err := s.Kube.CoordinationV1().Leases("fleetwright").Get(context.Background(), "fleetwright-scheduler", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, "scheduler-1", aws.ToString(lease.Spec.HolderIdentity), "the stopped leader released the Lease")
	late := 0
	for _, w := range proxies[0].Writes() {
		if w.Delayed > 0 && w.Status >= 400 {
			late++
		}
	}
	infraLogf(t, "two replicas of %v; scheduler-0's Lease writes held 12 s mid-scale-up (%d held, %d refused when they arrived late): it stepped down %s and scheduler-1 led %s after the hold began; 9 pods Running %s after that (%s after the first scale-up); one claim per needed node; invariants held",
		services, proxies[0].Delayed(), late, stepped.Round(100*time.Millisecond), flipped.Round(100*time.Millisecond), running.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// infraLogTime is the time of the first log line of a service with the message.
func infraLogTime(t *testing.T, log, message string) time.Time {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"message":"`+message) {
			continue
		}
		var l struct {
			Time time.Time `json:"time"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		return l.Time
	}
	t.Fatalf("no log line %q", message)
	return time.Time{}
}

// infraHoldsLease reports whether scheduler replica r has logged that it acquired the Lease.
func infraHoldsLease(s *e2e.Stack, r int) bool {
	svc := s.Replica("scheduler", r)
	return svc != nil && strings.Contains(svc.Log(), `"message":"acquired lease; scheduling"`)
}

// infraConsumedBy lists, for every subject a service consumes, the services that consume it (and
// count what they could not decode under fleetwright_bus_messages_total).
var infraConsumedBy = map[string][]string{
	subject.PodsPending:                                {"scheduler"},
	subject.LaunchIntents:                              {"launcher"},
	subject.OfferingsUnavailable:                       {"scheduler", "launcher"}, // followed by every replica
	"interruptions." + subject.InterruptionSpot:        {"terminator", "scheduler"},
	"interruptions." + subject.InterruptionScheduled:   {"terminator", "scheduler"},
	"interruptions." + subject.InterruptionStateChange: {"terminator", "scheduler"},
	"interruptions." + subject.InterruptionRebalance:   {"terminator", "scheduler"},
	subject.TerminationsIntents:                        {"terminator"},
	subject.TerminationsUrgent:                         {"terminator"},
}

// Malformed and oversized messages on every subject the services consume, and malformed
// interruption-queue (SQS) bodies: each is counted on the consuming service's /metrics,
// dead-lettered, and the services stay ready and still scale up.
func TestFaultMalformedAndOversizedMessages(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{Services: infraWithTerminator()})
	infraWatch(t, s)
	nc, js := infraJetStream(t, s)
	ctx := context.Background()
	p := subject.DefaultPrefix

	// Three bad messages per subject: bytes that are no protobuf, a message naming another
	// type, and one as large as the server takes (headers and all).
	before := map[string]float64{}
	for leaf, svcs := range infraConsumedBy {
		for _, svc := range svcs {
			before[leaf+"/"+svc] = infraMetric(t, s, svc, 0, "fleetwright_bus_messages_total", `subject="`+p.Of(leaf)+`"`, `outcome="undecodable"`)
		}
	}
	for leaf := range infraConsumedBy {
		subj := p.Of(leaf)
		for i, m := range []*nats.Msg{
			{Subject: subj, Data: []byte{0xff, 0xff, 0xff, 0xff, 'n', 'o', 't'}, Header: nats.Header{}},
			{Subject: subj, Data: []byte{0x0a, 0x01, 'x'}, Header: nats.Header{bus.HeaderType: []string{"fleetwright.nope.v1.Nope"}}},
			{Subject: subj, Header: nats.Header{}},
		} {
			m.Header.Set(bus.HeaderMsgID, fmt.Sprintf("fault-%s-%d", leaf, i))
			if i == 2 {
				m.Data = make([]byte, int(nc.MaxPayload())-200)
				for j := range m.Data {
					m.Data[j] = 0xff
				}
			}
			_, err := js.PublishMsg(ctx, m)
			require.NoError(t, err, "publishing bad message %d on %s", i, subj)
		}
	}

	// Three bad interruption-queue bodies: no JSON, a known event with a broken detail, and one
	// near SQS's 256 KiB limit.
	sqsc := infraSQS(t, s)
	q, err := sqsc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("fleetwright-demo-cluster")})
	require.NoError(t, err)
	malformedBefore := infraMetric(t, s, "terminator", 0, "fleetwright_interruption_messages_total", `kind="malformed"`)
	bodies := []string{
		"this is not JSON",
		`{"version":"0","id":"bad-1","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":"oops"}`,
		"{" + strings.Repeat("x", 250<<10),
	}
	for _, b := range bodies {
		_, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(b)})
		require.NoError(t, err)
	}

	// Counted by every consumer of the subject.
	for leaf, svcs := range infraConsumedBy {
		for _, svc := range svcs {
			require.Eventually(t, func() bool {
				return infraMetric(t, s, svc, 0, "fleetwright_bus_messages_total", `subject="`+p.Of(leaf)+`"`, `outcome="undecodable"`)-before[leaf+"/"+svc] >= 3
			}, time.Minute, 200*time.Millisecond, "%s counts the 3 bad messages on %s as undecodable", svc, leaf)
		}
	}
	require.Eventually(t, func() bool {
		return infraMetric(t, s, "terminator", 0, "fleetwright_interruption_messages_total", `kind="malformed"`)-malformedBefore >= 3
	}, time.Minute, 200*time.Millisecond, "the terminator counts the 3 malformed queue bodies")

	// Dead-lettered: three dead letters per subject (one per bad message, however many
	// consumers), and the three queue bodies; the queue is empty.
	dls, err := js.Stream(ctx, p.Stream(subject.StreamDeadLetter))
	require.NoError(t, err)
	dlCount := func(origin string) uint64 {
		info, err := dls.Info(ctx, jetstream.WithSubjectFilter(p.DeadLetter(origin)))
		require.NoError(t, err)
		return info.State.Subjects[p.DeadLetter(origin)]
	}
	for leaf := range infraConsumedBy {
		require.Eventually(t, func() bool { return dlCount(p.Of(leaf)) == 3 }, time.Minute, 200*time.Millisecond, "3 dead letters for %s", leaf)
	}
	require.Eventually(t, func() bool { return dlCount(p.Of(subject.SQSInterruptions)) == 3 }, time.Minute, 200*time.Millisecond, "3 dead letters for the queue")
	// The launcher's workers decode in parallel, so the oversized message's dead letter is found
	// by the id it was published with, not by its place on the subject.
	oversized := infraDeadLetterOf(t, js, p.DeadLetter(p.Of(subject.LaunchIntents)), fmt.Sprintf("fault-%s-2", subject.LaunchIntents))
	assert.Equal(t, fmt.Sprint(int(nc.MaxPayload())-200), oversized.Headers().Get(bus.HeaderTruncated), "the oversized message is dead-lettered cut, saying so")
	assert.Less(t, len(oversized.Data()), int(nc.MaxPayload())-200, "the oversized message's dead letter is cut")
	attrs, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	require.NoError(t, err)
	assert.Equal(t, "0", attrs.Attributes["ApproximateNumberOfMessages"], "the bad bodies left the queue")
	assert.Equal(t, "0", attrs.Attributes["ApproximateNumberOfMessagesNotVisible"], "the bad bodies left the queue")

	// Still serving: ready, and a scale-up works.
	infraAllReady(t, s, infraWithTerminator(), 1)
	infraScale(t, s, false, 4)
	running := infraWaitRunning(t, s, 4, 3*time.Minute)
	s.AssertInvariants(t, []string{"default"}, infraSettle)
	infraAllReady(t, s, infraWithTerminator(), 1)
	infraLogf(t, "3 bad messages (garbage, wrong type, %d bytes) on each of %d subjects and 3 bad SQS bodies: all counted and dead-lettered; 4 pods Running %s after the next scale-up; invariants held",
		int(nc.MaxPayload())-200, len(infraConsumedBy), running.Round(100*time.Millisecond))
}

// infraDeadLetterOf reads the dead letters on dlSubject and returns the one parked for the message
// published with Nats-Msg-Id originalID.
func infraDeadLetterOf(t *testing.T, js jetstream.JetStream, dlSubject, originalID string) jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	stream, err := js.StreamNameBySubject(ctx, dlSubject)
	require.NoError(t, err)
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{dlSubject}})
	require.NoError(t, err)
	var seen []string
	for {
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			id := m.Headers().Get(bus.HeaderOriginalMsgID)
			if id == originalID {
				return m
			}
			seen = append(seen, id)
		}
		if n == 0 {
			t.Fatalf("no dead letter on %s for message %s (fetch: %v); dead letters there are for %v", dlSubject, originalID, batch.Error(), seen)
		}
	}
}

// infraSQS is an SQS client of the real SDK pointed at the stack's emulator.
func infraSQS(t *testing.T, s *e2e.Stack) *sqs.Client {
	t.Helper()
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.EmuURL),
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", "")})
}

func infraApplyPDB(t *testing.T, s *e2e.Stack) {
	t.Helper()
	path := t.TempDir() + "/pdb.yaml"
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: inflate, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: inflate}}
`), 0o644))
	s.Apply(path)
}

// infraBusiestNode is the node running most inflate pods, and its instance id.
func infraBusiestNode(t *testing.T, s *e2e.Stack) (string, string) {
	t.Helper()
	_, on := infraRunning(t, s)
	best, most := "", 0
	for n, c := range on {
		if c > most {
			best, most = n, c
		}
	}
	require.NotEmpty(t, best)
	node, err := s.Kube.CoreV1().Nodes().Get(context.Background(), best, metav1.GetOptions{})
	require.NoError(t, err)
	return best, node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
}

func infraTainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}

// infraPodsOn lists the nodes the live inflate pods are on.
func infraPodsOn(t *testing.T, s *e2e.Stack) []string {
	t.Helper()
	_, on := infraRunning(t, s)
	var out []string
	for n := range on {
		out = append(out, n)
	}
	return out
}
