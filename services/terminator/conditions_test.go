package main

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// A drain says how it goes, as Karpenter's does. On the deleting NodeClaim: Drained is False
// (Draining, naming the pod) while a PodDisruptionBudget holds a pod, then True;
// VolumesDetached is False (AwaitingVolumeDetachment) while a VolumeAttachment names the
// node, then True; InstanceTerminating is True once the instance is terminated. Events:
// FailedDraining on the Node and NodeClaim naming the pod that blocks, AwaitingVolumeDetachment
// on the Node, Evicted on each evicted pod.
func TestDrainConditionsAndEvents(t *testing.T) {
	e := newEnv(t, 108)
	e.budget("held", "held", 0)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	n := e.node(inst)
	nc := e.claim("drained-a", inst, n.Name, decided(disruption.ReasonExpired))
	e.runningPod("held", n.Name, "held")
	e.pod("free", n.Name, nil)
	vas := e.kube.StorageV1().VolumeAttachments()
	va := e.ns + "-vol"
	_, err := vas.Create(e.ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: va},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: n.Name,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-" + va)}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = vas.Delete(context.Background(), va, metav1.DeleteOptions{}) })

	// Every version of the claim's conditions, from a watch started before the terminator.
	w, err := e.dyn.Resource(clusterstate.NodeClaims).Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + nc.Name, ResourceVersion: "0"})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []metav1.Condition
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			var got karpv1.NodeClaim
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got) == nil {
				mu.Lock()
				seen = append(seen, got.Status.Conditions...)
				mu.Unlock()
			}
		}
	}()
	saw := func(typ string, status metav1.ConditionStatus, reason, message string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(seen, func(c metav1.Condition) bool {
			return c.Type == typ && c.Status == status && c.Reason == reason && strings.Contains(c.Message, message)
		})
	}
	eventOn := func(ns, name, reason, message string) bool {
		evs, err := e.kube.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		return err == nil && slices.ContainsFunc(evs.Items, func(ev corev1.Event) bool {
			return ev.Reason == reason && strings.Contains(ev.Message, message) && ev.Source.Component == "fleetwright-terminator"
		})
	}

	e.run("--drain-slice", "10s")
	e.deleteByHand(nc.Name) // as the scheduler does when it decides the expiry
	in := &terminationv1.TerminationIntent{IntentId: string(nc.UID) + "/expired", NodeClaimName: nc.Name, NodeName: n.Name,
		InstanceId: inst.ID, ProviderId: providerID(inst), NodePoolName: "default", Reason: commonv1.TerminationReason_TERMINATION_REASON_EXPIRED,
		RequestTime: timestamppb.Now(), Why: "expired for the test"}
	require.NoError(t, e.conn.Publish(e.ctx, intentsSubject(), in, in.GetIntentId()))

	blocker := e.ns + "/held"
	require.Eventually(t, func() bool {
		return saw(karpv1.ConditionTypeDrained, metav1.ConditionFalse, "Draining", "1 pods are waiting to be evicted: "+blocker)
	}, wait, tick, "Drained is False while the budget holds %s", blocker)
	require.Eventually(t, func() bool {
		return eventOn("default", n.Name, reasonFailedDraining, blocker) && eventOn("default", nc.Name, reasonFailedDraining, blocker)
	}, wait, tick, "FailedDraining on the node and the claim names the pod that blocks")
	require.Eventually(t, func() bool { return eventOn(e.ns, "free", reasonEvicted, n.Name) }, wait, tick, "the evicted pod has an Evicted event")
	assert.False(t, saw(karpv1.ConditionTypeDrained, metav1.ConditionTrue, karpv1.ConditionTypeDrained, ""), "not drained while the pod is held")

	require.NoError(t, e.kube.PolicyV1().PodDisruptionBudgets(e.ns).Delete(e.ctx, "held", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		return saw(karpv1.ConditionTypeDrained, metav1.ConditionTrue, karpv1.ConditionTypeDrained, "") &&
			saw(karpv1.ConditionTypeVolumesDetached, metav1.ConditionFalse, "AwaitingVolumeDetachment", va)
	}, wait, tick, "Drained once the pod is evicted; VolumesDetached False while %s is there", va)
	require.Eventually(t, func() bool { return eventOn("default", n.Name, reasonAwaitingVolumes, va) }, wait, tick,
		"the node's AwaitingVolumeDetachment event names the attachment")
	assert.True(t, eventOn(e.ns, "held", reasonEvicted, n.Name), "the pod the budget held was evicted once it let go")
	assert.False(t, saw(karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, karpv1.ConditionTypeInstanceTerminating, ""),
		"the instance is not terminated while a volume is attached")
	assert.Equal(t, "running", e.instance(inst.ID).State)

	require.NoError(t, vas.Delete(e.ctx, va, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, nc.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, wait, tick, "the claim goes once the volume is detached")
	require.Eventually(t, func() bool {
		return saw(karpv1.ConditionTypeVolumesDetached, metav1.ConditionTrue, karpv1.ConditionTypeVolumesDetached, "") &&
			saw(karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, karpv1.ConditionTypeInstanceTerminating, inst.ID)
	}, wait, tick, "VolumesDetached, then InstanceTerminating, before the claim went")
	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(inst.ID).State)
}
