package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// Without any NodePool the pods stay pending: no claim, no intent, and both their events and
// the log say that no NodePool exists.
func TestNoNodePoolTellsThePods(t *testing.T) {
	e := newEnv(t, "sched-nopool")
	e.start("nopool")
	e.refused("nopool-1", e.pendingPods("inflate", 2, "1"), "no NodePool exists")
	assert.Zero(t, e.launchIntentCount())
	assert.Contains(t, e.logs.String(), "no NodePool exists")
}

// A pool whose taint the pods do not tolerate: the event names the taint.
func TestUntoleratedTaintIsNamed(t *testing.T) {
	e := newEnv(t, "sched-taint")
	e.createNodePool("tainted", "default", corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
	e.start("taint")
	e.refused("taint-1", e.pendingPods("inflate", 1, "1"), "dedicated=gpu:NoSchedule")
}

// A pool whose node class the launcher found not Ready is not used, and the pods are told why.
func TestPoolWithUnreadyClassIsNotUsed(t *testing.T) {
	e := newEnv(t, "sched-unready")
	e.createNodePool("unready", "missing")
	e.edit(clusterstate.NodePools, "unready", true, func(u *unstructured.Unstructured) {
		cond := map[string]any{"type": karpv1.ConditionTypeNodeClassReady, "status": "False", "reason": "NodeClassNotFound",
			"message": `no EC2NodeClass named "missing"`, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions"))
	})
	e.start("unready")
	e.refused("unready-1", e.pendingPods("inflate", 1, "1"), `nodepool unready is not ready: no EC2NodeClass named "missing"`)
}

// The v1alpha5 example (Provisioner + AWSNodeTemplate) schedules as its v1 translation: a
// claim labelled with the provisioner's name, spot only, with Karpenter's default types.
func TestProvisionerClaimIsLabelledForIt(t *testing.T) {
	e := newEnv(t, "sched-v1alpha5", v1alpha5Example)
	e.start("v1alpha5")
	pods := e.pendingPods("inflate", 3, "1")
	intent, msgID := e.schedule("legacy-1", pods)

	nc := e.onlyClaim()
	assert.Equal(t, "default", nc.Labels[scheduling.LabelProvisionerName])
	assert.NotContains(t, nc.Labels, scheduling.LabelNodePool, "v1alpha5 nodes carry no nodepool label")
	assert.Equal(t, "default", intent.GetNodePoolName(), "the pool is named after the provisioner")
	assert.Empty(t, nc.OwnerReferences, "a Provisioner does not own its claims")
	assert.True(t, nc.Spec.ExpireAfter.IsNever(), "v1alpha5 never expired nodes")
	req := requirementsOf(nc)
	assert.Equal(t, []string{"spot"}, req[scheduling.LabelCapacityType])
	require.NotEmpty(t, req[scheduling.LabelInstanceType])
	for _, it := range req[scheduling.LabelInstanceType] {
		category := it[:1]
		assert.Contains(t, []string{"c", "m", "r"}, category, "Karpenter's default categories: %s", it)
	}
	assert.Equal(t, nc.Name, msgID)
	assert.Equal(t, "default", intent.GetLabels()[scheduling.LabelProvisionerName])
	assert.Equal(t, "default", intent.GetNodeClassRef().GetName())
	for _, opt := range intent.GetInstanceTypes() {
		for _, o := range opt.GetOfferings() {
			assert.Equal(t, commonv1.CapacityType_CAPACITY_TYPE_SPOT, o.GetCapacityType())
		}
	}
	e.eventsSay(pods, reasonNominated, "nodeclaim/"+nc.Name)
}

// Offerings the launcher reports unavailable are left out of the next claim: one published
// before the scheduler started (replayed) and one published while it runs.
func TestUnavailableOfferingsAreAvoided(t *testing.T) {
	e := newEnv(t, "sched-ice", v1Example)
	e.publishUnavailable("t4g.medium", "us-east-1a", commonv1.CapacityType_CAPACITY_TYPE_SPOT)
	e.start("ice")
	e.publishUnavailable("t4g.medium", "us-east-1a", commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND)
	require.Eventually(t, func() bool {
		return strings.Count(e.logs.String(), "avoiding unavailable offering") == 2
	}, time.Minute, 50*time.Millisecond, "both unavailable offerings are seen")
	intent, _ := e.schedule("ice-1", e.pendingPods("inflate", 5, "300m"))

	types := requirementsOf(e.onlyClaim())[scheduling.LabelInstanceType]
	require.NotEmpty(t, types)
	assert.NotContains(t, types, "t4g.medium", "both offerings of the cheapest type are unavailable")
	assert.Equal(t, "t4g.large", types[0], "the next cheapest that fits")
	for _, opt := range intent.GetInstanceTypes() {
		assert.NotEqual(t, "t4g.medium", opt.GetName())
	}
}

func (e *env) publishUnavailable(instanceType, zone string, ct commonv1.CapacityType) {
	now := time.Now()
	msg := &launchv1.OfferingUnavailable{InstanceType: instanceType, Zone: zone, CapacityType: ct,
		Reason: "InsufficientInstanceCapacity", ObserveTime: timestamppb.New(now), Ttl: durationpb.New(3 * time.Minute),
		ExpireTime: timestamppb.New(now.Add(3 * time.Minute))}
	require.NoError(e.t, e.conn.Publish(e.ctx, e.conn.Prefix().Of(subject.OfferingsUnavailable), msg, ""))
}

// createNodePool creates an on-demand NodePool of the EC2NodeClass, with the taints.
func (e *env) createNodePool(name, class string, taints ...corev1.Taint) {
	np := karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class},
			Taints:       taints,
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: scheduling.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
		}}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&np)
	require.NoError(e.t, err)
	_, err = e.dyn.Resource(clusterstate.NodePools).Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// A DaemonSet's pod lands on every new node: its requests are part of the claim's.
func TestDaemonSetOverheadIsCounted(t *testing.T) {
	e := newEnv(t, "sched-daemonset", v1Example)
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: e.ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "a", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("125m")}}}}}}}}
	_, err := e.kube.AppsV1().DaemonSets(e.ns).Create(e.ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)
	e.start("daemonset")
	intent, _ := e.schedule("ds-1", e.pendingPods("inflate", 5, "300m"))
	assert.Equal(t, int64(1625), intent.GetResources().GetQuantities()["cpu"], "five pods and the agent")
	assert.Equal(t, int64(6), intent.GetResources().GetQuantities()["pods"])
	assert.Contains(t, e.logs.String(), `launching nodeclaim with 5 pods requesting {\"cpu\":\"1625m\",\"pods\":\"6\"}`)
}

// A pool whose EC2NodeClass caps pods at 10 never plans 11 on one node, though one t4g node
// would hold them otherwise; the intents carry the cap for the launcher.
func TestNodeClassMaxPodsLimitsPacking(t *testing.T) {
	e := newEnv(t, "sched-maxpods", v1Example)
	e.patch(clusterstate.NodeClasses, "default", `{"spec":{"kubelet":{"maxPods":10}}}`)
	e.start("maxpods")
	first, _ := e.schedule("maxpods-1", e.pendingPods("inflate", 11, "10m"))
	second, _ := e.nextIntent()
	total := 0
	for _, intent := range []*launchv1.LaunchIntent{first, second} {
		// DaemonSet pods (other tests' may linger) count towards maxPods too.
		n := intent.GetResources().GetQuantities()["pods"]
		assert.LessOrEqual(t, n, int64(10), "no node planned with more than maxPods")
		assert.Equal(t, int32(10), intent.GetKubelet().GetMaxPods())
		total += len(intent.GetPods())
	}
	assert.Equal(t, 11, total)
	assert.Len(t, e.nodeClaims(), 2)
}

// Kubelet settings no kubelet would take leave the pool out, and the pods are told why.
func TestNodeClassBadKubeletSettingsAreRefused(t *testing.T) {
	e := newEnv(t, "sched-badkubelet", v1Example)
	e.patch(clusterstate.NodeClasses, "default", `{"spec":{"kubelet":{"kubeReserved":{"memory":"lots"}}}}`)
	e.start("badkubelet")
	e.refused("badkubelet-1", e.pendingPods("inflate", 1, "10m"), `kubelet kubeReserved["memory"]: "lots" is not a non-negative quantity`)
}

// A node class whose subnets the launcher resolved to one zone offers its pool's capacity in
// that zone only: nothing can launch where it has no subnet.
func TestOfferingsOnlyWhereTheNodeClassHasSubnets(t *testing.T) {
	e := newEnv(t, "sched-subnets", v1Example)
	e.edit(clusterstate.NodeClasses, "default", true, func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"id": "subnet-b", "zone": "us-east-1b"}}, "status", "subnets"))
	})
	// The example pool keeps to us-east-1a; this one may use any zone.
	e.edit(clusterstate.NodePools, "default", false, func(np *unstructured.Unstructured) {
		reqs, _, _ := unstructured.NestedSlice(np.Object, "spec", "template", "spec", "requirements")
		var anyZone []any
		for _, r := range reqs {
			if r.(map[string]any)["key"] != scheduling.LabelZone {
				anyZone = append(anyZone, r)
			}
		}
		require.NoError(t, unstructured.SetNestedSlice(np.Object, anyZone, "spec", "template", "spec", "requirements"))
	})

	e.start("subnets")
	intent, _ := e.schedule("subnets-1", e.pendingPods("inflate", 2, "1"))
	claims := e.nodeClaims()
	require.NotEmpty(t, claims)
	for _, c := range claims {
		assert.Equal(t, []string{"us-east-1b"}, requirementsOf(c)[scheduling.LabelZone])
	}
	for _, opt := range intent.GetInstanceTypes() {
		for _, o := range opt.GetOfferings() {
			assert.Equal(t, "us-east-1b", o.GetZone(), "%s offered in a zone without a subnet", opt.GetName())
		}
	}
}

// A pool's limits.nodes caps how many nodes it has: pods that each need a node of their own get
// one claim under a limit of one, and the rest are told which limit holds them.
func TestNodeLimitCapsTheClaims(t *testing.T) {
	e := newEnv(t, "sched-node-limit", v1Example)
	e.edit(clusterstate.NodePools, "default", false, func(np *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedStringMap(np.Object, map[string]string{"nodes": "1"}, "spec", "limits"))
	})

	e.start("node-limit")
	pods := e.pendingPods("apart", 3, "500m", func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "apart"}}}}}}
	})
	e.publishBatch("node-limit-1", pods)
	e.batchesDone(1)
	assert.Len(t, e.nodeClaims(), 1, "a limit of one node")
	limited := func() int { // events are recorded asynchronously: they may trail the ack
		n := 0
		for _, p := range pods {
			for _, m := range e.podEvents(p, reasonFailedScheduling) {
				if strings.Contains(m, "nodepool default would exceed its nodes limit of 1") {
					n++
					break
				}
			}
		}
		return n
	}
	assert.Eventually(t, func() bool { return limited() >= 2 }, 30*time.Second, 100*time.Millisecond,
		"the two pods left are told the nodes limit holds them")
	assert.Equal(t, 2, limited(), "only the two pods left")
}

// A pool whose own requirements leave fewer instance types than its minValues asks is told so
// on the NodePool, in Karpenter's words (its NoCompatibleInstanceTypes event), and no claim is
// made for its pods.
func TestPoolWithoutTypesIsTold(t *testing.T) {
	e := newEnv(t, "sched-notypes")
	e.createNodePool("minvalues", "default")
	e.edit(clusterstate.NodePools, "minvalues", false, func(u *unstructured.Unstructured) {
		req := map[string]any{"key": "node.kubernetes.io/instance-type", "operator": "In",
			"values": []any{"m5.large", "invalid-instance-type-1", "invalid-instance-type-2"}, "minValues": int64(3)}
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{req}, "spec", "template", "spec", "requirements"))
	})
	e.start("notypes")
	e.refused("notypes-1", e.pendingPods("inflate", 1, "1"), "incompatible with nodepool minvalues")
	const want = "NodePool requirements filtered out all compatible available instance types due to minValues incompatibility"
	require.Eventually(t, func() bool {
		list, err := e.kube.CoreV1().Events(metav1.NamespaceAll).List(e.ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=NodePool,involvedObject.name=minvalues,reason=NoCompatibleInstanceTypes"})
		require.NoError(t, err)
		for _, ev := range list.Items {
			if ev.Message == want && ev.Type == corev1.EventTypeWarning {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "the NodePool's NoCompatibleInstanceTypes event")
	assert.Zero(t, e.launchIntentCount())
}

// A NodeClaim made by hand, of no pool and naming no instance types, is launched as Karpenter
// launches one: its intent offers every type its requirements and requests allow, on the
// offerings they allow, cheapest first.
func TestHandMadeClaimIsLaunchedAsItsRequirementsAllow(t *testing.T) {
	e := newEnv(t, "sched-handmade")
	e.start("handmade")
	nc := karpv1.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "handmade"},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"m"}},
				{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}},
				{Key: scheduling.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&nc)
	require.NoError(t, err)
	created, err := e.dyn.Resource(clusterstate.NodeClaims).Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err)
	nc.UID = created.GetUID()
	intent := e.nextIntentOf(nc)
	require.NotEmpty(t, intent.GetInstanceTypes(), "types the claim's requirements allow")
	assert.NotEmpty(t, intent.GetZones())
	assert.Equal(t, []commonv1.CapacityType{commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND}, intent.GetCapacityTypes())
	prev := 0.0
	for _, it := range intent.GetInstanceTypes() {
		ct, ok := catalog.Lookup(it.GetName())
		require.True(t, ok, it.GetName())
		assert.Equal(t, "m", ct.Category, it.GetName())
		assert.Greater(t, ct.Generation, 4, it.GetName())
		assert.GreaterOrEqual(t, ct.VCPU, 4, "%s: 3 CPUs must fit its allocatable", it.GetName())
		for _, o := range it.GetOfferings() {
			assert.Equal(t, commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND, o.GetCapacityType(), it.GetName())
		}
		assert.GreaterOrEqual(t, it.GetOfferings()[0].GetPriceUsdPerHour(), prev, "cheapest first")
		prev = it.GetOfferings()[0].GetPriceUsdPerHour()
	}
}
