package clusterstate

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// nominationsCache is a Cache whose informers' stores hold the claims, each nominating
// podsPerClaim pending pods, and those pods (the informers are not run: their stores are filled
// directly, as the watch would).
func nominationsCache(t testing.TB, claims, podsPerClaim int) (*Cache, []*karpv1.NodeClaim) {
	c := &Cache{
		Pods: cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{byNode: podByNode, byOwner: podByOwner}),
		NodeClaims: cache.NewSharedIndexInformer(&cache.ListWatch{}, &karpv1.NodeClaim{}, 0,
			cache.Indexers{byInstance: claimByInstance, byNominee: claimByNominee}),
	}
	at := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	var out []*karpv1.NodeClaim
	for i := range claims {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i), ResourceVersion: "1",
			Annotations: map[string]string{}}}
		for j := range podsPerClaim {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("web-%d-%d", i, j),
				UID: types.UID(fmt.Sprintf("00000000-0000-0000-%04d-%012d", i, j))}}
			require.NoError(t, c.Pods.GetIndexer().Add(p))
			n := podproj.PodNomination{UID: string(p.UID), Pod: p.Namespace + "/" + p.Name, At: at}
			nc.Annotations[podproj.NominationKey(n.UID)] = n.Value()
		}
		require.NoError(t, c.NodeClaims.GetIndexer().Add(nc))
		out = append(out, nc)
	}
	return c, out
}

// The nomination check's reads, every couple of seconds: each claim's nominees, and each
// nominee's latest nomination. 50 claims of 100 pods (5,000 pending pods) per op.
func BenchmarkNominationReads(b *testing.B) {
	c, claims := nominationsCache(b, 50, 100)
	b.ReportAllocs()
	for b.Loop() {
		for _, nc := range claims {
			for _, p := range c.NomineesOf(nc) {
				if c.NominationOf(string(p.UID)).Claim != nc.Name {
					b.Fatal("nomination not found")
				}
			}
		}
	}
}

// The parsed records follow the claim: a new version is parsed again, a deleted claim's are
// dropped, and a claim the informer does not hold (a deleted claim's last state) is read
// without being kept.
func TestNominationRecordsFollowTheClaim(t *testing.T) {
	c, claims := nominationsCache(t, 1, 2)
	nc := claims[0]
	assert.Len(t, c.NominationsOn(nc), 2)
	assert.Equal(t, nc.Name, c.NominationOf("00000000-0000-0000-0000-000000000001").Claim)

	next := nc.DeepCopy()
	next.ResourceVersion = "2"
	delete(next.Annotations, podproj.NominationKey("00000000-0000-0000-0000-000000000001"))
	require.NoError(t, c.NodeClaims.GetIndexer().Update(next))
	assert.Empty(t, c.NominationOf("00000000-0000-0000-0000-000000000001").Claim, "the removed record is gone")
	assert.Len(t, c.NominationsOn(next), 1, "the new version is parsed again")
	_, ok := c.NominationOn(next, "00000000-0000-0000-0000-000000000000")
	assert.True(t, ok)

	assert.Len(t, c.NominationsOn(nc), 2, "an older version read (a delete event's) is parsed, not served from the newer one's records")
	require.NoError(t, c.NodeClaims.GetIndexer().Delete(next))
	c.forgetRecords(next.Name)
	assert.Len(t, c.NominationsOn(next), 1)
	assert.Empty(t, c.noms.byClaim, "a claim the informer no longer holds is not kept")
}

// A claim whose delete the memory missed (deleted between a read and its keeping) is swept out
// as the memory grows.
func TestNominationRecordsOfClaimsGoneAreSwept(t *testing.T) {
	c, claims := nominationsCache(t, 70, 1)
	c.NominationsOn(claims[0])
	require.NoError(t, c.NodeClaims.GetIndexer().Delete(claims[0]))
	for _, nc := range claims[1:] {
		c.NominationsOn(nc)
	}
	assert.NotContains(t, c.noms.byClaim, claims[0].Name)
	assert.Len(t, c.noms.byClaim, 69)
}
