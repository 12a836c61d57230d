package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// A NodeClaim written before a crash, whose intent never went out, gets its intent from the
// reconcile loop; a launched one does not, and repeats are deduplicated on the claim's name.
func TestReconcileRepublishesUnlaunchedClaims(t *testing.T) {
	e := newEnv(t, "sched-reconcile", v1Example)
	orphan := e.leftByDeadLeader("default-orphan")
	admin := e.startMetered("reconcile")
	intent := e.nextIntentOf(orphan)
	require.Len(t, intent.GetInstanceTypes(), 1)
	assert.Equal(t, "t4g.medium", intent.GetInstanceTypes()[0].GetName())
	require.Len(t, intent.GetInstanceTypes()[0].GetOfferings(), 1, "only the claim's zone and capacity type")
	o := intent.GetInstanceTypes()[0].GetOfferings()[0]
	assert.Equal(t, "us-east-1a", o.GetZone())
	assert.Equal(t, commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND, o.GetCapacityType())

	// Several passes later: still one intent in the stream, none for the launched claim.
	require.Eventually(t, func() bool { return published(t, admin, "reconcile") >= 3 }, time.Minute, 100*time.Millisecond,
		"the reconcile loop publishes on every pass")
	assert.Equal(t, uint64(1), e.launchIntentCount())
}

// leftByDeadLeader writes two claims of the default pool as a leader that died left them: one
// launched, and the named one, whose intent never went out, which it returns.
func (e *env) leftByDeadLeader(name string) karpv1.NodeClaim {
	e.createClaim("default-launched", true)
	return e.createClaim(name, false)
}

// createClaim writes a NodeClaim of the default pool, as the scheduler would have, optionally
// marked Launched.
func (e *env) createClaim(name string, launched bool, mutate ...func(*karpv1.NodeClaim)) karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: scheduling.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"t4g.medium"}},
				{Key: scheduling.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
				{Key: scheduling.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		},
	}
	for _, m := range mutate {
		m(nc)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nc)
	require.NoError(e.t, err)
	u, err := e.dyn.Resource(clusterstate.NodeClaims).Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	var out karpv1.NodeClaim
	require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out))
	if launched {
		e.updateClaimStatus(out.Name, func(nc *karpv1.NodeClaim) {
			nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.Now()})
		})
	}
	return out
}

// updateClaimStatus reads the NodeClaim, lets change edit it, and writes its status back.
func (e *env) updateClaimStatus(name string, change func(*karpv1.NodeClaim)) {
	e.t.Helper()
	e.edit(clusterstate.NodeClaims, name, true, func(u *unstructured.Unstructured) {
		var nc karpv1.NodeClaim
		require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc))
		change(&nc)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&nc)
		require.NoError(e.t, err)
		u.Object = obj
	})
}

// A NodeClaim the previous leader created moments before it died, before publishing its
// intent (the fault matrix's scheduler.before-publish): the new leader publishes the intent at
// takeover, not a reconcile interval later (10 minutes here), with the pods nominated to it.
func TestTakeoverPublishesIntentsOfInheritedClaims(t *testing.T) {
	e := newEnv(t, "sched-inherit", v1Example)
	young := e.leftByDeadLeader("default-young")
	admin := e.startMetered("inherit", "--reconcile-interval", "10m")
	e.nextIntentOf(young)
	publishedOnce(t, admin, "takeover")
	assert.Equal(t, 0, published(t, admin, "reconcile"), "not by the reconcile loop: the claim is younger than its interval")
	assert.Equal(t, uint64(1), e.launchIntentCount(), "none for the launched claim")
}

// startMetered is start with an admin address of the test's choosing, which it returns: the
// replica's /metrics are there.
func (e *env) startMetered(identity string, extra ...string) (admin string) {
	admin = e2e.FreeAddr(e.t)
	e.start(identity, append([]string{"--admin-addr", admin}, extra...)...)
	return admin
}

// published reads how many intents the scheduler has published from source, from /metrics at
// admin (-1 while nothing answers there).
// publishedOnce checks that one intent was counted as published from source. The scheduler
// counts it once JetStream has acknowledged it, which may come after the test's consumer has
// the message: the count is waited for.
func publishedOnce(t *testing.T, admin, source string) {
	t.Helper()
	require.Eventually(t, func() bool { return published(t, admin, source) >= 1 }, 10*time.Second, 50*time.Millisecond,
		"the intent is counted as published from %s", source)
	assert.Equal(t, 1, published(t, admin, source))
}

func published(t *testing.T, admin, source string) int {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`fleetwright_scheduler_launch_intents_total\{source="` + source + `"\} (\d+)`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

// A batch that fails after creating its NodeClaim (here the API server refuses to nominate one
// of its pods, as when it restarts mid-batch) still publishes that claim's intent: the claim
// exists, its retry counts it as capacity in flight and nominates its pods to it, and nothing
// else would publish it before the reconcile loop (10 minutes here).
func TestFailedBatchPublishesTheIntentsOfItsClaims(t *testing.T) {
	e := newEnv(t, "sched-failedbatch", v1Example)
	admin := e.startMetered("failedbatch", "--reconcile-interval", "10m")
	pods := e.pendingPods("refused", 2, "500m")
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods"]}
  validations:
    - expression: "object.metadata.name != '%[2]s'"
      message: refused by the test
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[3]s}
`, "refuse-"+e.ns, pods[1].Name, e.ns)), 0o600))
	_, err := e2e.Kubectl(e.c, "apply", "-f", policy)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = e2e.Kubectl(e.c, "delete", "-f", policy) })
	require.Eventually(t, func() bool {
		_, err := e.kube.CoreV1().Pods(e.ns).Patch(e.ctx, pods[1].Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"x"}}}`), metav1.PatchOptions{})
		return err != nil
	}, 30*time.Second, 200*time.Millisecond, "the policy refuses updates of %s", pods[1].Name)

	intent, msgID := e.schedule("failing", pods)
	claims := e.nodeClaims()
	require.NotEmpty(t, claims)
	assert.Equal(t, claims[0].Name, msgID, "the intent is the claim's")
	assert.Equal(t, string(claims[0].UID), intent.GetNodeClaimUid())
	assert.Equal(t, 0, published(t, admin, "reconcile"))
}

// A NodeClaim this replica did not write appears after its takeover — a Create whose answer
// was lost when the API server restarted mid-request: the batch's retry finds it in flight and
// places its pods on it, and publishes its intent then, not a reconcile interval later.
func TestPodsPlacedOnAClaimNotWrittenHerePublishItsIntent(t *testing.T) {
	e := newEnv(t, "sched-adopted", v1Example)
	admin := e.startMetered("adopted", "--reconcile-interval", "10m")
	lost := e.createClaim("default-lost-answer", false) // a t4g.medium requesting 1 CPU: room for one more
	pods := e.pendingPods("waiting", 1, "500m")
	time.Sleep(time.Second) // the scheduler's cache sees the claim (milliseconds)
	e.publishBatch("retry", pods)

	e.nextIntentOf(lost)
	publishedOnce(t, admin, "adopted")
	assert.Len(t, e.nodeClaims(), 1, "the pod went to the claim in flight, no new one was made")
}
