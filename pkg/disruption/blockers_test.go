package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func appPod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, Labels: map[string]string{"app": "web"}, Annotations: annotations},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-10 * time.Minute)}}}
}

func pdb(name string, sel *metav1.LabelSelector, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: sel, MaxUnavailable: &intstr.IntOrString{IntVal: 1}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

func TestDoNotDisrupt(t *testing.T) {
	cases := []struct {
		name      string
		value     string
		started   *metav1.Time
		protected bool
		until     time.Time
		bad       bool
	}{
		{"true", "true", nil, true, time.Time{}, false},
		{"a duration still running", "1h", &metav1.Time{Time: now.Add(-10 * time.Minute)}, true, now.Add(50 * time.Minute), false},
		{"a duration over", "5m", &metav1.Time{Time: now.Add(-10 * time.Minute)}, false, now.Add(-5 * time.Minute), false},
		{"a duration, pod not started: protected", "5m", nil, true, time.Time{}, false},
		{"false protects nothing, and is told", "false", nil, false, time.Time{}, true},
		{"a negative duration protects nothing", "-5m", nil, false, time.Time{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := appPod("a", map[string]string{karpv1.DoNotDisruptAnnotationKey: tc.value})
			p.Status.StartTime = tc.started
			protected, until, err := DoNotDisrupt(p, now)
			assert.Equal(t, tc.protected, protected)
			assert.Equal(t, tc.until, until)
			assert.Equal(t, tc.bad, err != nil, "err %v", err)
		})
	}
	protected, _, err := DoNotDisrupt(appPod("b", nil), now)
	assert.False(t, protected)
	assert.NoError(t, err)
	protected, _, _ = DoNotDisrupt(appPod("c", map[string]string{"karpenter.sh/do-not-evict": "true"}), now)
	assert.True(t, protected, "v1alpha5's do-not-evict")
}

func TestBlocker(t *testing.T) {
	all := &metav1.LabelSelector{}
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	other := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	daemon := appPod("agent", map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"})
	daemon.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: new(bool)}}
	*daemon.OwnerReferences[0].Controller = true
	cases := []struct {
		name  string
		pods  []*corev1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		cause Cause
	}{
		{"nothing holds it", []*corev1.Pod{appPod("a", nil)}, nil, ""},
		{"a do-not-disrupt pod", []*corev1.Pod{appPod("a", map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"})}, nil, CauseDoNotDisruptPod},
		{"a do-not-disrupt duration over", []*corev1.Pod{appPod("a", map[string]string{karpv1.DoNotDisruptAnnotationKey: "1m"})}, nil, ""},
		{"a do-not-disrupt DaemonSet pod holds it too", []*corev1.Pod{daemon}, nil, CauseDoNotDisruptPod},
		{"a budget allowing none", []*corev1.Pod{appPod("a", nil)}, []*policyv1.PodDisruptionBudget{pdb("p", web, 0)}, CausePDB},
		{"a budget allowing one", []*corev1.Pod{appPod("a", nil)}, []*policyv1.PodDisruptionBudget{pdb("p", web, 1)}, ""},
		{"an empty selector selects every pod", []*corev1.Pod{appPod("a", nil)}, []*policyv1.PodDisruptionBudget{pdb("p", all, 0)}, CausePDB},
		{"a missing selector selects none", []*corev1.Pod{appPod("a", nil)}, []*policyv1.PodDisruptionBudget{pdb("p", nil, 0)}, ""},
		{"another app's budget", []*corev1.Pod{appPod("a", nil)}, []*policyv1.PodDisruptionBudget{pdb("p", other, 0)}, ""},
		{"two budgets over one pod", []*corev1.Pod{appPod("a", nil)}, []*policyv1.PodDisruptionBudget{pdb("p", web, 1), pdb("q", all, 1)}, CausePDB},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cause, why, blocked := Blocker(tc.pods, Movable(tc.pods), tc.pdbs, now, nil)
			assert.Equal(t, tc.cause, cause, why)
			assert.Equal(t, tc.cause != "", blocked)
		})
	}
}

// The candidates a pass considers, and what holds the others back.
func TestCandidates(t *testing.T) {
	pool := func(policy karpv1.ConsolidationPolicy, after string) *clusterstate.Pool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		np.Spec.Disruption.ConsolidationPolicy = policy
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(after)
		return &clusterstate.Pool{NodePool: np}
	}
	view := func(name string, p *clusterstate.Pool, opts ...func(*clusterstate.NodeView)) clusterstate.NodeView {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "default"},
			Annotations: map[string]string{}}}
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))})
		nc.Status.NodeName = name
		v := clusterstate.NodeView{Claim: nc, Pool: p, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}}
		for _, o := range opts {
			o(&v)
		}
		return v
	}
	withPod := func(v *clusterstate.NodeView) { v.Pods = append(v.Pods, appPod("a", nil)) }
	busySince := func(ago time.Duration) func(*clusterstate.NodeView) {
		return func(v *clusterstate.NodeView) { v.Claim.Status.LastPodEventTime = metav1.NewTime(now.Add(-ago)) }
	}
	under := pool(karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, "30s")
	empty := pool(karpv1.ConsolidationPolicyWhenEmpty, "30s")
	views := []clusterstate.NodeView{
		view("empty-old", empty),
		view("busy-under-old", under, withPod, busySince(time.Minute)),
		view("busy-under-new", under, withPod, busySince(10*time.Second)),
		view("busy-whenempty", empty, withPod, busySince(time.Hour)),
		view("node-do-not-disrupt", under, func(v *clusterstate.NodeView) {
			v.Node.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		}),
		view("decided", under, func(v *clusterstate.NodeView) { v.Claim.Annotations[DecisionAnnotation] = "{}" }),
		view("awaited", under),
		view("drifted-blocked", under, withPod, func(v *clusterstate.NodeView) {
			v.Claim.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"})
			v.Pods[0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			v.Claim.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Minute}
		}),
	}
	cands, blocked := Candidates(views, Inputs{Now: now, Awaited: map[string]Block{"awaited": {Cause: CauseNominated, Why: "a pod waits"}}})
	got := map[string]Candidate{}
	for _, c := range cands {
		got[c.Name()] = c
	}
	assert.True(t, got["empty-old"].Empty() && got["empty-old"].Consolidatable, "empty under WhenEmpty, past consolidateAfter since initialized")
	assert.True(t, got["busy-under-old"].Consolidatable, "no pod event for a minute")
	assert.False(t, got["busy-under-new"].Consolidatable, "a pod event 10s ago")
	assert.False(t, got["busy-whenempty"].Consolidatable, "WhenEmpty never consolidates a node with pods")
	assert.NotContains(t, got, "decided", "a node decided on is not a candidate again")
	d := got["drifted-blocked"]
	assert.Equal(t, "NodePoolDrifted", d.Drifted)
	assert.True(t, d.Blocked() && d.EventuallyDisruptable(), "held by a do-not-disrupt pod, but its grace period bounds the wait")
	causes := map[string]Cause{}
	for _, b := range blocked {
		causes[b.Claim] = b.Cause
	}
	assert.Equal(t, map[string]Cause{"node-do-not-disrupt": CauseDoNotDisruptNode, "awaited": CauseNominated}, causes)
}
