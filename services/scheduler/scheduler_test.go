package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// A batch of five small pods against the example v1 pool becomes one NodeClaim of the cheapest
// t4g type that fits, owned by the pool; the pods are nominated to it and told so; one
// LaunchIntent goes out with the claim's name as its dedup id and its types cheapest first.
// The same batch delivered again changes nothing.
func TestBatchBecomesOneNodeClaimAndOneIntent(t *testing.T) {
	e := newEnv(t, "sched-basic", v1Example)
	e.start("basic")
	pods := e.pendingPods("inflate", 5, "300m")
	intent, msgID := e.schedule("batch-1", pods)

	nc := e.onlyClaim("one node fits all five pods")
	assert.True(t, strings.HasPrefix(nc.Name, "default-"), "named <pool>-<hash>: %s", nc.Name)
	assert.Equal(t, "default", nc.Labels[karpv1.NodePoolLabelKey])
	require.Len(t, nc.OwnerReferences, 1)
	assert.Equal(t, "NodePool", nc.OwnerReferences[0].Kind)
	assert.Equal(t, "default", nc.OwnerReferences[0].Name)
	assert.Equal(t, []string{karpv1.TerminationFinalizer}, nc.Finalizers, "the terminator owns the claim's end from its start")
	assert.Equal(t, &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}, nc.Spec.NodeClassRef)
	assert.Equal(t, "720h", nc.Spec.ExpireAfter.String())
	require.NotNil(t, nc.Spec.TerminationGracePeriod)
	assert.Equal(t, 10*time.Minute, nc.Spec.TerminationGracePeriod.Duration)
	req := requirementsOf(nc)
	types := req[scheduling.LabelInstanceType]
	require.NotEmpty(t, types)
	assert.LessOrEqual(t, len(types), 60)
	assert.Equal(t, "t4g.medium", types[0], "the cheapest t4g that fits 1500m")
	for _, it := range types {
		assert.True(t, strings.HasPrefix(it, "t4g."), "pool allows t4g only: %s", it)
	}
	assert.Equal(t, []string{"us-east-1a"}, req[scheduling.LabelZone])
	assert.ElementsMatch(t, []string{"spot", "on-demand"}, req[scheduling.LabelCapacityType])
	cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]
	assert.Equal(t, "1500m", cpu.String())
	podCount := nc.Spec.Resources.Requests[corev1.ResourcePods]
	assert.Equal(t, int64(5), podCount.Value())

	// The intent: dedup id = claim name, the claim's uid, its types cheapest first.
	assert.Equal(t, nc.Name, msgID)
	assert.Equal(t, "batch-1", intent.GetBatchId(), "the intent names the batch the claim was planned for")
	assert.Equal(t, nc.Name, intent.GetNodeClaimName())
	assert.Equal(t, string(nc.UID), intent.GetNodeClaimUid())
	assert.Equal(t, "default", intent.GetNodePoolName())
	assert.Equal(t, "EC2NodeClass", intent.GetNodeClassRef().GetKind())
	assert.Len(t, intent.GetPods(), 5)
	assert.Equal(t, int64(1500), intent.GetResources().GetQuantities()["cpu"])
	assert.Equal(t, "default", intent.GetLabels()[karpv1.NodePoolLabelKey])
	require.NotEmpty(t, intent.GetInstanceTypes())
	assert.Equal(t, "t4g.medium", intent.GetInstanceTypes()[0].GetName())
	prev := 0.0
	for _, opt := range intent.GetInstanceTypes() {
		require.NotEmpty(t, opt.GetOfferings())
		for i, o := range opt.GetOfferings() {
			assert.Equal(t, "us-east-1a", o.GetZone())
			if i > 0 {
				assert.LessOrEqual(t, opt.GetOfferings()[i-1].GetPriceUsdPerHour(), o.GetPriceUsdPerHour(), "offerings cheapest first")
			}
		}
		assert.LessOrEqual(t, prev, opt.GetOfferings()[0].GetPriceUsdPerHour(), "types cheapest first")
		prev = opt.GetOfferings()[0].GetPriceUsdPerHour()
	}
	assert.Equal(t, commonv1.CapacityType_CAPACITY_TYPE_SPOT, intent.GetInstanceTypes()[0].GetOfferings()[0].GetCapacityType(),
		"modelled spot is below on-demand")

	// Each pod is nominated to the claim and told so.
	e.assertNominatedTo(pods, nc.Name, "nominated to the batch's claim")
	e.eventsSay(pods, reasonNominated, "Pod should schedule on: nodeclaim/"+nc.Name)

	// Redelivery of the same pods (a duplicate batch under another id) creates nothing.
	e.publishBatch("batch-1-again", pods)
	e.batchesDone(2)
	assert.Len(t, e.nodeClaims(), 1, "no second NodeClaim for nominated pods")
	assert.Equal(t, uint64(1), e.launchIntentCount(), "no second intent")

	// Pods that fit the in-flight claim's room are nominated to it: no new claim.
	small := e.pendingPods("small", 2, "200m")
	e.publishBatch("batch-2", small)
	e.batchesDone(3)
	e.eventsSay(small, reasonNominated, "Pod should schedule on: nodeclaim/"+nc.Name)
	e.assertNominatedTo(small, nc.Name, "nominated to the claim in flight")
	assert.Len(t, e.nodeClaims(), 1, "the in-flight claim had room")

	logs := e.logs.String()
	assert.Contains(t, logs, "computed 1 existing or in-flight node(s) will fit 2 pod(s)")
	assert.Contains(t, logs, "found 5 provisionable pod(s)")
	assert.Contains(t, logs, "computed 1 new nodeclaim(s) to fit 5 pod(s)")
	assert.Contains(t, logs, `"message":"created nodeclaim"`)
	assert.Contains(t, logs, `launching nodeclaim with 5 pods requesting {\"cpu\":\"1500m\",\"pods\":\"5\"} from types t4g.medium`)
}

// requirementsOf maps each In requirement's key to its values.
func requirementsOf(nc karpv1.NodeClaim) map[string][]string {
	out := map[string][]string{}
	for _, r := range nc.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn {
			out[r.Key] = r.Values
		}
	}
	return out
}

// A 100-pod batch against the v1alpha5 example (spot, Karpenter's default types): planned onto
// one large claim offered as 60 types, every pod nominated before the intent goes out.
func TestLargeBatch(t *testing.T) {
	e := newEnv(t, "sched-large", v1alpha5Example)
	e.start("large")
	pods := e.pendingPods("inflate", 100, "1")
	intent, _ := e.schedule("large-1", pods)

	nc := e.onlyClaim("one instance of ≥ 100 vCPU is cheaper per CPU than several")
	assert.Len(t, intent.GetInstanceTypes(), 60, "at most 60 types, cheapest first")
	assert.Len(t, intent.GetPods(), 100)
	e.assertNominatedTo(pods, nc.Name, "nominated before the intent")
}

// Issue 14: nominating costs no API write per pod. 8 pods of 1.5 CPU, two to a node at most (the
// example pool's types have at most 4 vCPU, its limit is 20), are planned onto several claims,
// created side by side with their pods' nominations in them: the scheduler writes nothing to
// any pod, one create per claim, and every pod is nominated.
func TestNominatingCostsNoWritePerPod(t *testing.T) {
	e := newEnv(t, "sched-writes", v1Example)
	proxy := e.startProxied("writes")
	pods := e.pendingPods("many", 8, "1500m")
	since := time.Now()
	e.publishBatch("batch-many", pods)
	e.batchesDone(1)

	claims := e.nodeClaims()
	require.Greater(t, len(claims), 1, "several claims (created side by side), each with its pods' nominations")
	assert.True(t, e.allNominated(pods), "every pod nominated: %v", e.nominations(pods))
	assert.Empty(t, proxy.writesSince(since, regexp.MustCompile(`^/api/v1/namespaces/[^/]+/pods/`)), "no write to any pod")
	assert.Len(t, proxy.writesSince(since, regexp.MustCompile(`^/apis/karpenter\.sh/v1/nodeclaims`)), len(claims), "one write per claim: its create")
}
