package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// annotate sets an annotation on a NodeClaim.
func (e *env) annotate(name, key, value string) {
	e.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	require.NoError(e.t, err)
	_, err = e.dyn.Resource(clusterstate.NodeClaims).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(e.t, err)
}

// A replacement that fails to launch abandons the decision: the replacement is deleted, the old
// claim's decision record removed (it no longer counts against its budget), and an event on it
// says why. Nothing was tainted: the old node's termination was never asked for.
func TestFailedReplacementAbandonsTheDecision(t *testing.T) {
	e := newEnv(t, "abandon")
	rec, err := json.Marshal(decision{Reason: karpv1.DisruptionReasonUnderutilized, Action: "Replace", Replacements: []string{"default-rep"},
		DecidedAt: time.Now().UTC().Truncate(time.Second), Why: "test", Nodes: 1})
	require.NoError(t, err)
	e.createClaim("default-old", true)
	e.annotate("default-old", decisionKey, string(rec))
	e.createClaim("default-rep", false)
	e.annotate("default-rep", replacesAnnotation, "default-old")
	e.updateClaimStatus("default-rep", func(nc *karpv1.NodeClaim) {
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionFalse, Reason: "LaunchFailed",
			Message: "InsufficientInstanceCapacity for every offering", LastTransitionTime: metav1.Now()})
	})
	e.start("abandon-1", "--disruption-interval", "200ms")

	api := e.dyn.Resource(clusterstate.NodeClaims)
	require.Eventually(t, func() bool {
		_, err := api.Get(e.ctx, "default-rep", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "the failed replacement is deleted")
	require.Eventually(t, func() bool {
		u, err := api.Get(e.ctx, "default-old", metav1.GetOptions{})
		require.NoError(t, err)
		return u.GetAnnotations()[decisionKey] == ""
	}, time.Minute, 100*time.Millisecond, "the old claim no longer carries the decision")
	require.Eventually(t, func() bool {
		evs, err := e.kube.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=default-old,reason=DisruptionAbandoned"})
		require.NoError(t, err)
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, "replacement default-rep failed to launch: InsufficientInstanceCapacity") {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "an event on the old claim says why it was abandoned")
	assert.NotContains(t, e.logs.String(), "DisruptionTerminating")
	assert.NotContains(t, e.logs.String(), "initialized; draining")
}
