package main

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// deadLetter waits for the next dead-lettered launch intent and returns its Fw-Error.
func (e *env) deadLetter() string {
	e.t.Helper()
	cons, err := e.js.CreateOrUpdateConsumer(e.ctx, "FLEETWRIGHT_DEADLETTER", jetstream.ConsumerConfig{
		Durable: "test-deadletters", FilterSubject: "fleetwright.deadletter.launch.intents", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(e.t, err)
	msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
	require.NoError(e.t, err, "the intent is dead-lettered")
	require.NoError(e.t, msg.Ack())
	return msg.Headers().Get(bus.HeaderError)
}

// Issue 31, item 4: an intent that names no NodeClaim UID is refused — dead-lettered with a
// message that says why — and launches nothing; before, an empty UID skipped the UID check.
func TestIntentWithoutUIDIsRefused(t *testing.T) {
	e := start(t)
	intent := e.claim("default-nouid", "m5.large")
	intent.NodeClaimUid = ""
	e.publish(intent, "no-uid")
	assert.Contains(t, e.deadLetter(), "names no NodeClaim UID")
	assert.Zero(t, e.createFleetCalls(), "nothing is launched")
	assert.Empty(t, e.nodeClaim("default-nouid").Status.ProviderID)
}

// Issue 31, item 4: what is launched is read from the NodeClaim, not from the intent, which
// only names it. An intent that asks for other instance types, another zone, capacity type and
// node class, other labels and no taints gets the claim's: an m5.large in us-east-1a whose
// node has the claim's labels and startup taint, and none of the intent's.
func TestLaunchIsMadeFromTheClaimNotTheIntent(t *testing.T) {
	e := start(t)
	intent := e.claim("default-trusted", "m5.large")
	intent.NodePoolName = "elsewhere"
	intent.NodeClassRef = &commonv1.ObjectRef{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "no-such-class"}
	intent.Zones = []string{"us-east-1c"}
	intent.CapacityTypes = []commonv1.CapacityType{commonv1.CapacityType_CAPACITY_TYPE_SPOT}
	intent.InstanceTypes = []*launchv1.InstanceTypeOption{{Name: "m5.24xlarge", Offerings: []*catalogv1.Offering{
		{Zone: "us-east-1c", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT, PriceUsdPerHour: 0.001, Available: true}}}}
	intent.Labels = map[string]string{"team": "intruder", "example.com/from-intent": "yes"}
	intent.Taints, intent.StartupTaints = nil, nil
	e.publish(intent, intent.NodeClaimName)

	nc := e.claimWhen("default-trusted", 90*time.Second, isRegistered, "launched and registered")
	assert.Equal(t, "m5.large", nc.Labels[karpv1.LabelInstanceType], "the claim's instance type")
	assert.Equal(t, "us-east-1a", nc.Labels[karpv1.LabelTopologyZone], "the claim's zone")
	node := e.node(nc)
	assert.Equal(t, "a", node.Labels["team"], "the claim's label")
	assert.NotContains(t, node.Labels, "example.com/from-intent")
	assert.Equal(t, "default", node.Labels[karpv1.NodePoolLabelKey])
	hasStartup := false
	for _, taint := range node.Spec.Taints {
		hasStartup = hasStartup || taint.Key == "example.com/agent-not-ready" && taint.Effect == corev1.TaintEffectNoSchedule
	}
	assert.True(t, hasStartup, "the claim's startup taint")
	r := e.nextResult()
	assert.Equal(t, launchv1.LaunchOutcome_LAUNCH_OUTCOME_LAUNCHED, r.Outcome, "%s %s", r.ErrorCode, r.ErrorMessage)
	assert.Equal(t, "default", r.NodePoolName, "the result names the claim's pool")
}

// Issue 31, item 10: a launched claim's status.allocatable is computed with the memory share
// the hypervisor keeps as the scheduler has it set (VM_MEMORY_OVERHEAD_PERCENT), not with a
// constant of the launcher's own: the scheduler reads that figure back for in-flight claims.
func TestAllocatableUsesTheSchedulersVMOverhead(t *testing.T) {
	e := start(t, "--vm-memory-overhead-percent", "0.2")
	e.launch("default", "default-overhead1", "m5.large")
	nc := e.claimWhen("default-overhead1", 60*time.Second, hasInstance, "launched")
	facts, ok := catalog.Lookup("m5.large")
	require.True(t, ok)
	want := func(overhead float64) int64 {
		_, alloc, err := scheduling.NodeResources(facts, clusterstate.NodeClassSettings(nil, nil, nil, "AL2023", overhead))
		require.NoError(t, err)
		rl := podproj.KubeResources(alloc)
		return rl.Memory().Value()
	}
	require.NotEqual(t, want(0.2), want(scheduling.VMMemoryOverhead))
	assert.Equal(t, want(0.2), nc.Status.Allocatable.Memory().Value(), "the setting's 20%%, not the default's 7.5%%")
}
