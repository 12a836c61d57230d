package podproj

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

func TestNominationRule(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rule := NominationRule{Grace: 20 * time.Second, Limit: 15 * time.Minute}
	claims := map[string]Claim{
		"in-flight": {Name: "in-flight"},
		"deleting":  {Name: "deleting", Deleting: true},
		"ready":     {Name: "ready", NodeName: "node-a", ReadyAt: t0.Add(10 * time.Second)},
	}
	lookup := func(name string) (Claim, bool) { c, ok := claims[name]; return c, ok }
	for _, tc := range []struct {
		name        string
		claim       string
		at, now     time.Time
		live        bool
		expires     time.Time
		expiredText string
	}{
		{name: "no nomination", now: t0},
		{name: "claim not seen yet, nominated moments ago", claim: "gone", at: t0, now: t0.Add(5 * time.Second), live: true, expires: t0.Add(20 * time.Second)},
		{name: "claim gone", claim: "gone", at: t0, now: t0.Add(20 * time.Second), expiredText: "no longer exists"},
		{name: "claim gone, nomination time unknown", claim: "gone", now: t0, expiredText: "no longer exists"},
		{name: "claim being deleted", claim: "deleting", at: t0, now: t0, expiredText: "being deleted"},
		{name: "in flight", claim: "in-flight", at: t0, now: t0.Add(time.Minute), live: true, expires: t0.Add(15 * time.Minute)},
		{name: "in flight without a time holds while the claim does", claim: "in-flight", now: t0.Add(time.Hour), live: true},
		{name: "in flight past the limit", claim: "in-flight", at: t0, now: t0.Add(16 * time.Minute), expires: t0.Add(15 * time.Minute), expiredText: "has no ready node yet"},
		{name: "node ready, within grace", claim: "ready", at: t0, now: t0.Add(29 * time.Second), live: true, expires: t0.Add(30 * time.Second)},
		{name: "node ready, grace over: the pod is offered again", claim: "ready", at: t0, now: t0.Add(30 * time.Second),
			expires: t0.Add(30 * time.Second), expiredText: "its node node-a has been ready for 20s without room"},
		{name: "nominated after the node was ready: grace runs from the nomination", claim: "ready", at: t0.Add(time.Minute),
			now: t0.Add(70 * time.Second), live: true, expires: t0.Add(80 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := rule.Judge(tc.claim, tc.at, lookup, tc.now)
			assert.Equal(t, tc.claim, n.Claim)
			assert.Equal(t, tc.live, n.Live)
			assert.Equal(t, tc.expires, n.Expires)
			if tc.expiredText == "" {
				assert.Empty(t, n.Expired)
			} else {
				assert.Contains(t, n.Expired, tc.expiredText)
			}
		})
	}
}

func TestJudgeNominationHonoursAnEndedNomination(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rule := NominationRule{Grace: time.Hour, Limit: time.Hour}
	lookup := func(name string) (Claim, bool) { return Claim{Name: name}, true } // in flight: live by the clock
	n := PodNomination{Claim: "claim-a", UID: "u1", Pod: "ns/p", At: t0}
	assert.True(t, rule.JudgeNomination(n, lookup, t0).Live)
	assert.False(t, rule.JudgeNomination(PodNomination{}, lookup, t0).Live, "no nomination")
	n.Ended = "its node has no room left for it"
	got := rule.JudgeNomination(n, lookup, t0)
	assert.False(t, got.Live, "the scheduler's record ends it at once")
	assert.Equal(t, "claim-a", got.Claim)
	assert.Equal(t, "its node has no room left for it", got.Expired)
}

// Nominations are recorded on the claim, one key per pod; a merge patch of some keys leaves the
// others alone, and what the patch writes reads back as it was written.
func TestNominationsRecordedOnTheClaim(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	noms := []PodNomination{{UID: "u2", Pod: "ns/b", At: at.Add(time.Second)}, {UID: "u1", Pod: "ns/a", At: at, Ended: "no room"}}
	var patch struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(NominationPatch(noms), &patch))
	assert.Len(t, patch.Metadata.Annotations, 2, "the patch sets the pods' keys and nothing else")
	patch.Metadata.Annotations["fleetwright.io/batch-id"] = "b-1"
	patch.Metadata.Annotations[NominationKeyPrefix+"u3"] = "not json"
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Annotations: patch.Metadata.Annotations}}

	assert.ElementsMatch(t, []string{"u1", "u2", "u3"}, NominatedUIDs(nc.Annotations))
	got := NominationsOn(nc)
	require.Len(t, got, 3)
	assert.Equal(t, PodNomination{Claim: "default-abc", UID: "u3"}, got[0], "an unreadable record is a nomination of unknown time")
	assert.Equal(t, PodNomination{Claim: "default-abc", UID: "u1", Pod: "ns/a", At: at, Ended: "no room"}, got[1], "oldest first")
	assert.Equal(t, "u2", got[2].UID)
	_, ok := NominationOn(nc, "u9")
	assert.False(t, ok)
}

func TestClaimOf(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc"}, Status: karpv1.NodeClaimStatus{NodeName: "n1"}}
	assert.Equal(t, Claim{Name: "default-abc", NodeName: "n1"}, ClaimOf(nc), "registered but not initialized: in flight")
	nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized",
		LastTransitionTime: metav1.NewTime(at)})
	assert.True(t, ClaimOf(nc).ReadyAt.Equal(at))
	now := metav1.NewTime(at)
	nc.DeletionTimestamp = &now
	assert.True(t, ClaimOf(nc).Deleting)
}

// Of two records of one pod's nomination the later counts; within the same second, the live one.
func TestNominationSupersedes(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ended := PodNomination{Claim: "a", At: at, Ended: "no room"}
	live := PodNomination{Claim: "b", At: at}
	assert.True(t, live.Supersedes(ended))
	assert.False(t, ended.Supersedes(live))
	assert.True(t, PodNomination{Claim: "a", At: at.Add(time.Second), Ended: "no room"}.Supersedes(live), "later wins")
	assert.False(t, live.Supersedes(live))
}

// Issue 30: a claim's nomination records stay within their budget, whatever the pods' number;
// the nominations past it are left over, in order.
func TestNominationsStayWithinTheBudget(t *testing.T) {
	at := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	var noms []PodNomination
	annotations := map[string]string{"other": strings.Repeat("x", 1000)}
	for i := range 2000 {
		noms = append(noms, PodNomination{UID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Pod: fmt.Sprintf("apps/web-%d", i), At: at})
	}
	kept, over := WithinBudget(0, noms)
	require.NotEmpty(t, over)
	assert.Equal(t, noms, append(append([]PodNomination(nil), kept...), over...), "split in order")
	for _, n := range kept {
		annotations[NominationKey(n.UID)] = n.Value()
	}
	assert.LessOrEqual(t, RecordsSize(annotations), NominationBudget)
	assert.Greater(t, RecordsSize(annotations)+over[0].RecordSize(), NominationBudget, "as many as fit are kept")
	assert.True(t, NominationsFull(RecordsSize(annotations)))
	assert.False(t, NominationsFull(0))

	kept, over = WithinBudget(NominationBudget-noms[0].RecordSize(), noms[:2])
	assert.Equal(t, noms[:1], kept)
	assert.Equal(t, noms[1:2], over)
}
