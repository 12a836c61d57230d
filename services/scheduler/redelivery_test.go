package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

// Issue 13, item 7: a batch whose first delivery created its NodeClaim and then failed (here
// the create goes through but its answer is lost, as when the API server restarts mid-request;
// a handler cut short or a replica killed after the create is the same) comes back, and its
// second handling must not make a second claim: it finds the pods nominated to the claim (the
// create recorded their nominations) and publishes the claim's intent, which nothing had. The pods ask for two instance types, so the claim offers both and the in-flight claim
// does not look like a node they can go to: only its name, the batch's and plan's, finds it.
func TestRedeliveredBatchMakesNoSecondSetOfClaims(t *testing.T) {
	e := newEnv(t, "sched-redeliver", v1Example)
	// No reconcile pass in the test's time: the redelivery publishes the claim's intent.
	proxy := e.startProxied("redeliver", "--reconcile-interval", "1h")

	pods := e.pendingPods("twotypes", 2, "300m", func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: scheduling.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"t4g.large", "t4g.xlarge"}}}}}}}}
	})
	lost := proxy.add(http.StatusInternalServerError, claimCreates)
	lost.lost = true
	e.publishBatch("batch-twice", pods)
	require.Eventually(t, func() bool { return lost.hits.Load() > 0 }, time.Minute, 20*time.Millisecond,
		"the first delivery creates its claim, and does not hear so")
	lost.off()
	in, msgID := e.nextIntent()
	e.batchesDone(1)
	nc := e.onlyClaim("the redelivered batch makes no second claim")
	assert.Regexp(t, `^default-[a-z2-7]{10}$`, nc.Name, "named after the batch and plan, as <pool>-<hash>")
	assert.Equal(t, "batch-twice", nc.Annotations[batchAnnotation])
	e.assertNominatedTo(pods, nc.Name, "nominated to the one claim")
	assert.Equal(t, nc.Name, msgID, "the redelivery finds the pods waiting on a claim no batch published, and publishes it")
	assert.Len(t, in.GetPods(), 2)
}

// Issue 13, item 7: a batch that takes longer than AckWait to handle (its NodeClaim create is
// held up for twice the consumer's 5 s AckWait) is kept in progress all along: another pull on the
// scheduler's consumer meanwhile (as a new leader's would be) gets nothing, and the batch is
// delivered once and makes one set of claims.
func TestBatchOutlivingAckWaitIsHandledOnce(t *testing.T) {
	e := newEnv(t, "sched-slow", v1Example)
	proxy := e.startProxied("slow")

	pods := e.pendingPods("slow", 3, "300m")
	hold := proxy.add(0, claimCreates)
	e.publishBatch("batch-slow", pods)
	require.Eventually(t, func() bool { return hold.hits.Load() > 0 }, time.Minute, 20*time.Millisecond, "the handler is creating the claim")
	stream, err := e.conn.JetStream().StreamNameBySubject(e.ctx, e.conn.Prefix().Of(subject.PodsPending))
	require.NoError(t, err)
	cons, err := e.conn.JetStream().Consumer(e.ctx, stream, durable)
	require.NoError(t, err)
	other, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second)) // twice AckWait
	require.NoError(t, err)
	for msg := range other.Messages() {
		_ = msg.Nak()
		t.Errorf("the batch was handed out again while the scheduler was handling it")
	}
	hold.off()

	e.batchesDone(1)
	require.Len(t, e.nodeClaims(), 1)
	assert.NotContains(t, e.logs.String(), `"attempt":2`, "the batch is not delivered again while it is handled")
	assert.Len(t, proxy.writesSince(time.Time{}, regexp.MustCompile(`^/apis/karpenter\.sh/v1/nodeclaims$`)), 1, "one NodeClaim create")
}

// A batch whose planned claim exists already under the name its plan gives (the name comes
// from the batch, the pool and the claim's pods) takes it as its own when the claim says it is
// this batch's: an earlier delivery made it, and this replica's cache had not seen it yet (made
// here by creating the claim before the batch comes, without its nominations, so the pods are
// planned again). A claim of that name for another batch is a hash collision and is refused:
// the batch fails, makes no claim and nominates nothing.
func TestClaimThePlanNamesExistingAlready(t *testing.T) {
	e := newEnv(t, "sched-exists", v1Example)
	e.start("exists")
	// Both pods of a batch on one t4g.xlarge: the claims made below offer only a t4g.medium, so
	// none is room for them.
	xlarge := func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: scheduling.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"t4g.xlarge"}}}}}}}}
	}
	mine := e.pendingPods("mine", 2, "1500m", xlarge)
	foreign := e.pendingPods("foreign", 2, "1500m", xlarge)
	nameFor := func(batch string, pods []*corev1.Pod) string {
		var uids []string
		for _, p := range pods {
			uids = append(uids, string(p.UID))
		}
		return claimName(batch, scheduling.NodeClaim{NodePool: "default", PodUIDs: uids})
	}
	made := e.createClaim(nameFor("batch-made", mine), false)
	e.patch(clusterstate.NodeClaims, made.Name, `{"metadata":{"annotations":{"`+batchAnnotation+`":"batch-made"}}}`)
	collision := e.createClaim(nameFor("batch-foreign", foreign), false)
	e.patch(clusterstate.NodeClaims, collision.Name, `{"metadata":{"annotations":{"`+batchAnnotation+`":"another-batch"}}}`)

	_, msgID := e.schedule("batch-made", mine)
	assert.Equal(t, made.Name, msgID, "the existing claim of this batch is taken as done and its intent published")
	assert.Contains(t, e.logs.String(), "exists already (an earlier delivery made it")

	e.publishBatch("batch-foreign", foreign)
	require.Eventually(t, func() bool {
		return strings.Contains(e.logs.String(), `nodeclaim `+collision.Name+` exists already for batch \"another-batch\", not this batch \"batch-foreign\"`)
	}, time.Minute, 50*time.Millisecond, "the colliding claim is refused, saying whose it is")
	assert.Len(t, e.nodeClaims(), 2, "no claim is made beside the two that exist")
	for _, p := range foreign {
		assert.Empty(t, e.nominatedTo(p), "%s is nominated to nothing", p.Name)
	}
}
