package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// karpenter are the Karpenter metric families the terminator serves (pkg/karpmetrics): what
// Karpenter's node.termination and nodeclaim.lifecycle controllers export as they drain and
// end nodes and claims, the cloud provider's Delete, and the AWS provider's interruption
// controller.
type karpenter struct {
	nodesTerminated, nodesDrained, claimsTerminated *prometheus.CounterVec
	nodeTermination                                 *prometheus.SummaryVec
	nodeLifetime, claimTermination                  *prometheus.HistogramVec
	podsDrained, evictionRequests, disrupted        *prometheus.CounterVec
	cpDuration                                      *prometheus.HistogramVec
	cpErrors, terminationFailures                   *prometheus.CounterVec
	received                                        *prometheus.CounterVec
	deleted                                         prometheus.Counter
	queueDuration                                   prometheus.Histogram
	reconciles                                      *karpmetrics.Reconciles
}

func newKarpenter(reg prometheus.Registerer) *karpenter {
	f := karpmetrics.Families{Reg: reg}
	k := &karpenter{
		nodesTerminated: f.NodesTerminated(), nodesDrained: f.NodesDrained(), claimsTerminated: f.NodeClaimsTerminated(),
		nodeTermination: f.NodesTerminationDuration(), nodeLifetime: f.NodesLifetimeDuration(), claimTermination: f.NodeClaimsTerminationDuration(),
		podsDrained: f.PodsDrained(), evictionRequests: f.PodsEvictionRequests(), disrupted: f.NodeClaimsDisrupted(),
		cpDuration: f.CloudProviderDuration(), cpErrors: f.CloudProviderErrors(), terminationFailures: f.InstanceTerminationFailures(),
		received: f.InterruptionReceived(), deleted: f.InterruptionDeleted(), queueDuration: f.InterruptionQueueDuration(),
		reconciles: f.Reconciles(),
	}
	k.reconciles.Init(karpmetrics.ControllerNodeTermination, karpmetrics.ControllerInterruption, karpmetrics.ControllerInstanceGC)
	return k
}

// registrationTimeout is Karpenter's nodeclaims_disrupted_total reason for a claim whose node
// never registered (its nodeclaim.lifecycle liveness check).
const registrationTimeout = "registration_timeout"

// forcefulTermination is the reason Karpenter gives a pod drained from a node no disruption
// decision chose (karpenter_pods_drained_total).
const forcefulTermination = "Forceful Termination"

// drainReason is karpenter_pods_drained_total's reason for the pods of claim's node: the
// reason of its DisruptionReason condition (Underutilized, Drifted, ...), as Karpenter reads it.
func drainReason(claim *karpv1.NodeClaim) string {
	if claim != nil {
		if c := claim.Condition(karpv1.ConditionTypeDisruptionReason); c != nil && c.Status == "True" && c.Reason != "" {
			return c.Reason
		}
	}
	return forcefulTermination
}

// evicted counts an Eviction API call: granted (200, and the pod counts as drained for reason)
// or refused with the status err carries (none for an error without one, as Karpenter).
func (k *karpenter) evicted(err error, reason string) {
	if err == nil {
		k.evictionRequests.WithLabelValues("200").Inc()
		k.podsDrained.WithLabelValues(reason).Inc()
		return
	}
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		k.evictionRequests.WithLabelValues(strconv.Itoa(int(s.Status().Code))).Inc()
	}
}

// drained counts a node drained, once: when its claim's Drained condition turns True, which
// the claim as this delivery read it did not yet say (a redelivery after the drain finds it
// said). A node without a claim is not counted, as in Karpenter.
func (k *karpenter) drained(claim *karpv1.NodeClaim) {
	if claim != nil && !claim.IsTrue(karpv1.ConditionTypeDrained) {
		k.nodesDrained.WithLabelValues(clusterstate.PoolOf(claim.Labels)).Inc()
	}
}

// nodeDeleted counts a node gone: its termination took from its deletion (the claim's, which
// starts it, or the node's own) until now, and it lived since its creation.
func (k *karpenter) nodeDeleted(node *corev1.Node, claim *karpv1.NodeClaim, now time.Time) {
	pool := clusterstate.PoolOf(node.Labels)
	k.nodesTerminated.WithLabelValues(pool, node.Labels[corev1.LabelTopologyZone]).Inc()
	switch {
	case claim != nil && claim.DeletionTimestamp != nil:
		k.nodeTermination.WithLabelValues(pool).Observe(now.Sub(claim.DeletionTimestamp.Time).Seconds())
	case node.DeletionTimestamp != nil:
		k.nodeTermination.WithLabelValues(pool).Observe(now.Sub(node.DeletionTimestamp.Time).Seconds())
	}
	k.nodeLifetime.WithLabelValues(pool).Observe(now.Sub(node.CreationTimestamp.Time).Seconds())
}

// claimDeleted counts a claim whose finalizer went, and the time since its deletion.
func (k *karpenter) claimDeleted(claim *karpv1.NodeClaim, now time.Time) {
	pool := clusterstate.PoolOf(claim.Labels)
	k.claimsTerminated.WithLabelValues(pool, claim.Labels[karpv1.CapacityTypeLabelKey], claim.Labels[karpv1.LabelTopologyZone]).Inc()
	if claim.DeletionTimestamp != nil {
		k.claimTermination.WithLabelValues(pool).Observe(now.Sub(claim.DeletionTimestamp.Time).Seconds())
	}
}

// instanceTerminated counts the cloud provider's Delete (TerminateInstances) as Karpenter's
// decorator does, from nodeclaim.lifecycle, and a failure by the instance's zone.
func (k *karpenter) instanceTerminated(claim *karpv1.NodeClaim, node *corev1.Node, took time.Duration, err error) {
	k.cpDuration.WithLabelValues(karpmetrics.ControllerNodeClaimLifecycle, karpmetrics.MethodDelete, karpmetrics.Provider).Observe(took.Seconds())
	if err == nil {
		return
	}
	k.cpErrors.WithLabelValues(karpmetrics.ControllerNodeClaimLifecycle, karpmetrics.MethodDelete, karpmetrics.Provider, "").Inc()
	var labels map[string]string
	switch {
	case node != nil:
		labels = node.Labels
	case claim != nil:
		labels = claim.Labels
	}
	k.terminationFailures.WithLabelValues(labels[corev1.LabelTopologyZone], labels[ec2v1.LabelTopologyZoneID]).Inc()
}

// messageType is the AWS provider's message kind (karpenter_interruption_received_messages_total's
// message_type, nodeclaims_disrupted_total's reason) of an interruption notice; state is a state
// change's instance state. A state it does not act on is a no-op message, as there.
func messageType(kind commonv1.InterruptionKind, state string) string {
	switch kind {
	case commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION:
		return karpmetrics.MessageSpotInterrupted
	case commonv1.InterruptionKind_INTERRUPTION_KIND_REBALANCE_RECOMMENDATION:
		return karpmetrics.MessageRebalanceRecommendation
	case commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE:
		return karpmetrics.MessageScheduledChange
	case commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE:
		switch strings.ToLower(state) {
		case "stopping", "stopped":
			return karpmetrics.MessageInstanceStopped
		case "shutting-down", "terminated":
			return karpmetrics.MessageInstanceTerminated
		}
	}
	return karpmetrics.MessageNoOp
}

// interrupted counts a claim an interruption disrupts (the AWS provider's
// nodeclaims_disrupted_total, reason the message's kind).
func (k *karpenter) interrupted(c claimRef, messageType string) {
	k.disrupted.WithLabelValues(messageType, c.Pool, c.CapacityType).Inc()
}

// handleMeasured is the executor's handle as controller_runtime_reconcile_* counts it,
// Karpenter's node.termination: a drain still going is requeued, not failed.
func (e *executor) handleMeasured(ctx context.Context, in *terminationv1.TerminationIntent, d bus.Delivery) (err error) {
	defer func(start time.Time) {
		if errors.Is(err, errStillDraining) {
			e.metrics.karp.reconciles.ObserveRequeue(karpmetrics.ControllerNodeTermination, start)
			return
		}
		e.metrics.karp.reconciles.Observe(karpmetrics.ControllerNodeTermination, start, err)
	}(time.Now())
	return e.handle(ctx, in, d)
}
