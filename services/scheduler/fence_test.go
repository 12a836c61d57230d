package main

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// Issue 13, item 8: the leader's Lease renewals are held up on their way to the API server while
// it is in the middle of a batch (its claim creates held up too, after the batch's first claim
// was created with its pods' nominations). It loses the Lease, the standby takes over and plans those pods itself.
// When the deposed leader's requests could flow again, it writes nothing more: no nomination,
// no second claim; the pods keep the new leader's plan.
func TestDeposedLeaderWritesNothingAfterItsLeaseExpires(t *testing.T) {
	e := newEnv(t, "sched-fence", v1Example)
	proxy := e.startProxied("old")
	e.standby("new")

	pods := e.pendingPods("split", 4, "1500m") // two to a t4g.xlarge at most: two claims or more
	creates := proxy.add(0, claimCreates)
	creates.spare.Store(1)
	e.publishBatch("batch-split", pods)
	require.Eventually(t, func() bool { return creates.hits.Load() > 0 && len(e.nodeClaims()) == 1 }, time.Minute, 20*time.Millisecond,
		"the leader created the batch's first claim and is creating the others")

	renewals := proxy.add(0, leaseWrites)
	require.Eventually(t, func() bool { return strings.Contains(e.logs.String(), `"batch":"takeover-new-`) }, time.Minute, 50*time.Millisecond,
		"the standby takes the lease over")
	require.Eventually(t, func() bool { return e.allNominated(pods) }, time.Minute, 50*time.Millisecond, "the new leader nominates every pod")
	deposed := time.Now()
	planned := e.nominations(pods)
	claims := len(e.nodeClaims())

	creates.off()    // the old leader's held requests may flow now; its renewals stay blocked
	e.batchesDone(1) // by whichever replica: the batch is settled

	late := proxy.writesSince(deposed, regexp.MustCompile(`^/api/v1/namespaces/[^/]+/pods/|^/apis/karpenter\.sh/`))
	assert.Empty(t, late, "the deposed leader writes no pod or NodeClaim once the new leader has taken over")
	assert.Len(t, e.nodeClaims(), claims, "no second set of claims")
	assert.Equal(t, planned, e.nominations(pods), "the pods keep the new leader's nominations")
	assert.Contains(t, e.logs.String(), "not writing: this replica's hold on the scheduler lease is gone or stale")
	renewals.off()
}

// Issue 31, fencing: the client-side fence cannot stop a write already on the wire. The
// deposed leader's claim create is held on its way to the API server until after the standby
// has taken the Lease over and planned the pods itself, and then delivered although the old
// leader stopped waiting for it, as a request delayed on the network is. The API server
// refuses it (deploy/base/scheduler/fence.yaml: a NodeClaim the scheduler writes carries its
// Lease term, which must be the Lease's current one): no second set of claims.
func TestDeposedLeadersLateWriteIsRefusedByTheAPIServer(t *testing.T) {
	e := newEnv(t, "sched-fence-late", v1Example)
	e.applyFence()
	proxy := e.startProxied("old")
	e.standby("new")

	pods := e.pendingPods("split", 4, "1500m") // two to a t4g.xlarge at most: two claims or more
	creates := proxy.add(0, claimCreates)
	creates.late = true
	creates.spare.Store(1)
	e.publishBatch("batch-late", pods)
	require.Eventually(t, func() bool { return creates.hits.Load() > 0 && len(e.nodeClaims()) == 1 }, time.Minute, 20*time.Millisecond,
		"the leader created the batch's first claim and is creating the others")

	renewals := proxy.add(0, leaseWrites)
	require.Eventually(t, func() bool { return strings.Contains(e.logs.String(), `"batch":"takeover-new-`) }, time.Minute, 50*time.Millisecond,
		"the standby takes the lease over")
	require.Eventually(t, func() bool { return e.allNominated(pods) }, time.Minute, 50*time.Millisecond, "the new leader nominates every pod")
	planned := e.nominations(pods)
	claims := len(e.nodeClaims())
	deposed := time.Now()

	creates.off() // the held create reaches the API server, late
	var late []forwarded
	require.Eventually(t, func() bool {
		late = nil
		for _, w := range proxy.writesSince(deposed, regexp.MustCompile(`^/apis/karpenter\.sh/v1/nodeclaims$`)) {
			if w.late {
				late = append(late, w)
			}
		}
		return len(late) > 0
	}, time.Minute, 20*time.Millisecond, "the deposed leader's held create reaches the API server")
	for _, w := range late {
		assert.Equal(t, http.StatusForbidden, w.status, "the API server refuses the deposed leader's late create")
	}
	assert.Equal(t, claims, len(e.nodeClaims()), "no second set of claims")
	assert.Equal(t, planned, e.nominations(pods), "the pods keep the new leader's nominations")
	renewals.off()
}

// applyFence installs the API server's fence of the scheduler's writes as deploy/ ships it,
// until the test ends.
func (e *env) applyFence() {
	e.t.Helper()
	path := filepath.Join(e2e.Root(e.t), "deploy", "base", "scheduler", "fence.yaml")
	_, err := e2e.Kubectl(e.c, "apply", "-f", path)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _, _ = e2e.Kubectl(e.c, "delete", "--ignore-not-found", "-f", path) })
}
