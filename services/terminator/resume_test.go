package main

import (
	"slices"
	"strings"
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
)

// A NodeClaim the executor deleted (it carries its intent's id) whose intent is no longer in
// the stream (aged out after a day-long PodDisruptionBudget, dead-lettered, purged) is not
// left Terminating with its node half drained: termination is level-triggered from the
// deleting claim, which gets its intent again, and the terminator drains the node,
// terminates the instance and lets Node and NodeClaim go.
func TestDeletingClaimWhoseIntentIsGoneIsFinished(t *testing.T) {
	e := newEnv(t, 204)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	node := e.node(inst, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint} })
	nc := e.claim("resume-a", inst, node.Name)
	e.pod("app", node.Name, nil)

	// As the executor leaves a claim it deleted: finalizer, intent id; then the intent is lost.
	claims := e.dyn.Resource(clusterstate.NodeClaims)
	u, err := claims.Get(e.ctx, nc.Name, metav1.GetOptions{})
	require.NoError(t, err)
	u.SetFinalizers([]string{karpv1.TerminationFinalizer})
	u.SetAnnotations(map[string]string{intentAnnotation: string(nc.UID) + "/expired"})
	_, err = claims.Update(e.ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, claims.Delete(e.ctx, nc.Name, metav1.DeleteOptions{}))

	e.run("--resume-after", "1s")
	require.Eventually(t, func() bool {
		_, err := claims.Get(e.ctx, nc.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, wait, tick, "the deleting claim is finished")
	_, err = e.kube.CoreV1().Nodes().Get(e.ctx, node.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the node is gone (%v)", err)
	pods, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, pods.Items, "the node was drained")
	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(inst.ID).State)
	assert.True(t, slices.ContainsFunc(e.emu.Calls(), func(c awsemu.Call) bool { return c.Action == "TerminateInstances" && c.ErrorCode == "" }))

	in := e.intents()
	require.NotEmpty(t, in)
	for _, x := range in {
		assert.True(t, strings.HasPrefix(x.GetIntentId(), string(nc.UID)+"/expired/resumed/"), "a resumed intent: %s", x.GetIntentId())
		assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_EXPIRED, x.GetReason(), "the reason of the intent that deleted it")
	}
}
