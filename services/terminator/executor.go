package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	nodesv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/nodes/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// errStillDraining ends a delivery whose drain is not finished; the intent is redelivered and
// the drain goes on where it stopped.
var errStillDraining = errors.New("node still draining")

// errNodeHeld ends a delivery whose instance is terminated and whose Node is deleted but still
// there, held by another's finalizer: the NodeClaim (InstanceTerminating) is kept until the Node
// is gone, as Karpenter keeps it, so the node is still seen as its claim's while it lingers and
// budgets do not take it for gone. The intent is redelivered until the Node goes.
var errNodeHeld = errors.New("node deleted but still held by another finalizer")

// executor carries out TerminationIntents. Every step reads the API server afresh and is
// idempotent; the NodeClaim's deletion is the point of no return, after which a voluntary
// intent is no longer abandoned.
type executor struct {
	k       *kube
	cs      kubernetes.Interface
	ec2     EC2API
	cluster string // terminates only instances tagged for it and a node pool (see owned)
	bus     publisher
	prefix  subject.Prefix
	log     zerolog.Logger
	metrics *metrics
	now     func() time.Time
	events  record.EventRecorder
	// resumeAfter is how long a deleting NodeClaim's termination may show no progress before
	// the decider publishes it again; the executor records progress well within it.
	resumeAfter time.Duration
	sleep       func(context.Context, time.Duration) // between drain rounds; nil: clock.Sleep
	volumes     attachmentIndex                      // the VolumeAttachments drains wait for
}

// result is what one execution came to.
type result struct {
	Outcome  terminationv1.TerminationOutcome
	Node     string
	Instance string
	Drain    time.Duration
	Why      string // for ABANDONED
	drainStats
}

// decidedByTheScheduler reports the reasons only the scheduler's decider gives, by deleting the
// NodeClaim (the terminator publishes their intents for deleting claims, deleted.go).
func decidedByTheScheduler(in *terminationv1.TerminationIntent) bool {
	switch in.GetReason() {
	case commonv1.TerminationReason_TERMINATION_REASON_EMPTY, commonv1.TerminationReason_TERMINATION_REASON_EXPIRED,
		commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED, commonv1.TerminationReason_TERMINATION_REASON_DRIFTED:
		return true
	}
	return false
}

// execute takes one intent as far as it can before budget: it returns errStillDraining if the
// drain has not finished by then. urgent says the intent came on the urgent subject, which only
// the terminator's own interruption handling publishes to: only there is an interruption one.
//
// What it acts on is read afresh (see target), and how the drain goes is the claim's: once the
// claim is deleting, its deadline is the deletion's (drainDeadline), whoever deleted it (a
// decision, a person with kubectl, this executor); karpenter.sh/do-not-disrupt pods are held
// until then, unless AWS is taking the instance.
func (e *executor) execute(ctx context.Context, in *terminationv1.TerminationIntent, urgent bool, budget time.Time, log zerolog.Logger) (result, error) {
	interruption := in.GetReason() == commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED
	if interruption && !urgent {
		return result{}, fmt.Errorf("interruption intent %s came on another subject than %s, where only the terminator publishes interruptions: %w",
			in.GetIntentId(), subject.TerminationsUrgent, errRefused)
	}
	t, err := e.target(ctx, in, interruption, log)
	if err != nil {
		return result{Node: t.nodeName, Instance: t.instance}, err
	}
	claim, node := t.claim, t.node
	res := result{Node: t.nodeName, Instance: t.instance}
	if claim == nil && node == nil {
		if err := terminateInstance(ctx, e.ec2, e.cluster, res.Instance); err != nil {
			return res, err
		}
		res.Outcome = terminationv1.TerminationOutcome_TERMINATION_OUTCOME_ALREADY_GONE
		return res, nil
	}
	// Nothing is tainted or drained for an instance the terminator may not end (see owned).
	if res.Instance != "" {
		if _, err := checkOwned(ctx, e.ec2, e.cluster, res.Instance); err != nil {
			return res, err
		}
	}

	committed := claim != nil && claim.DeletionTimestamp != nil
	if claim != nil && !committed && decidedByTheScheduler(in) {
		// Disruption is the scheduler's to decide, and it hands a decision over by deleting the
		// claim: an intent of its reasons for a claim nobody deleted carries out no decision.
		return res, fmt.Errorf("%s intent %s names nodeclaim %s, which is not being deleted: the scheduler decides %s and deletes the claim first: %w",
			reasonName(in.GetReason()), in.GetIntentId(), claim.Name, reasonName(in.GetReason()), errRefused)
	}
	if node != nil {
		if err := e.taint(ctx, node, in, log); err != nil {
			return res, err
		}
	}
	if claim != nil && !committed {
		if err := e.commit(ctx, claim, in, interruption, log); err != nil {
			return res, err
		}
		if claim, err = e.claim(ctx, claim.Name); err != nil {
			return res, err
		}
	}

	if e.superseded(claim, in) {
		return res, errSuperseded
	}
	beat := e.progress(ctx, claim, in, log)
	beat()
	if node != nil {
		if err := e.drainNode(ctx, claim, node, in, interruption, budget, &res, log, beat); err != nil {
			return res, err
		}
	}
	// A claim that records its instance's termination is one whose Node another's finalizer
	// holds (errNodeHeld): EC2 was asked already, so a delivery every few seconds while it is
	// held does not ask again.
	asked := claim != nil && claim.IsTrue(karpv1.ConditionTypeInstanceTerminating)
	if !asked {
		tctx, span := tracer.Start(ctx, "terminator.terminate-instance", trace.WithAttributes(attribute.String("fleetwright.instance_id", res.Instance)))
		terminating := e.now()
		err = terminateInstance(tctx, e.ec2, e.cluster, res.Instance)
		e.metrics.karp.instanceTerminated(claim, node, e.now().Sub(terminating), err)
		endSpan(span, err)
		if err != nil {
			return res, err
		}
		faultpoint.Reach(faultpoint.TerminatorAfterTerminate)
		log.Info().Str("instance", res.Instance).Msg("terminated instance")
	}
	if !asked && claim != nil && res.Instance != "" {
		if err := e.setConditions(ctx, claim.Name, condTrue(karpv1.ConditionTypeInstanceTerminating, "Terminating instance "+res.Instance)); err != nil {
			log.Warn().Err(err).Msg("recording the instance's termination")
		}
	}
	if node != nil {
		if err := e.k.nodes.release(ctx, node.Name); err != nil {
			return res, err
		}
		log.Info().Str("node", node.Name).Msg("deleted node")
		e.event(ctx, nodesv1.NodeEventKind_NODE_EVENT_KIND_DELETED, in, node)
		left, err := e.k.nodes.find(ctx, node.Name)
		if err != nil {
			return res, err
		}
		if left == nil {
			// Counted once, when the Node is gone: a Node held by another's finalizer is
			// released again on every delivery until it goes.
			e.metrics.karp.nodeDeleted(node, claim, e.now())
		}
		if left != nil && claim != nil {
			return res, fmt.Errorf("node %s is deleted but held by finalizers %v: nodeclaim %s is kept until it is gone: %w",
				node.Name, left.Finalizers, claim.Name, errNodeHeld)
		}
	}
	if claim != nil {
		if err := e.k.claims.release(ctx, claim.Name); err != nil {
			return res, err
		}
		e.metrics.karp.claimDeleted(claim, e.now())
		log.Info().Str("nodeclaim", claim.Name).Msg("deleted nodeclaim")
	}
	res.Outcome = terminationv1.TerminationOutcome_TERMINATION_OUTCOME_TERMINATED
	return res, nil
}

// drainNode drains the node of an intent's termination (see drain) as far as budget allows:
// errStillDraining if it is not done by then. Its deadline is drainDeadline's, recorded on the
// deleting claim.
func (e *executor) drainNode(ctx context.Context, claim *karpv1.NodeClaim, node *corev1.Node, in *terminationv1.TerminationIntent, interruption bool,
	budget time.Time, res *result, log zerolog.Logger, beat func(),
) error {
	pol := drainPolicy{Deadline: drainDeadline(claim, in, interruption, e.now()), Interruption: interruption, Reason: drainReason(claim)}
	e.recordDeadline(ctx, claim, pol.Deadline, log)
	started := e.now()
	if claim != nil && claim.DeletionTimestamp != nil {
		started = claim.DeletionTimestamp.Time
	}
	dctx, span := tracer.Start(ctx, "terminator.drain", trace.WithAttributes(attribute.String("fleetwright.node", node.Name),
		attribute.String("fleetwright.reason", reasonName(in.GetReason()))))
	done, err := e.drain(dctx, node.Name, pol, budget, &res.drainStats, log, e.watchDrain(dctx, claim, node.Name, log, beat))
	span.SetAttributes(attribute.Bool("fleetwright.drained", done))
	endSpan(span, err)
	if err != nil {
		return err
	}
	if !done {
		return errStillDraining
	}
	res.Drain = e.now().Sub(started)
	e.metrics.karp.drained(claim)
	l := log.Info().Str("node", node.Name).Dur("took", res.Drain)
	if !pol.Deadline.IsZero() {
		l = l.Dur("before_deadline", pol.Deadline.Sub(e.now())) // negative: pods were deleted at the deadline
	}
	l.Msg("drained node")
	e.event(ctx, nodesv1.NodeEventKind_NODE_EVENT_KIND_DRAINED, in, node)
	return nil
}

// watchDrain returns what a drain tells of each round: it records progress (beat) and, as the
// drain moves on, says so on the deleting NodeClaim (Drained False while pods are still to go,
// then True; VolumesDetached False while VolumeAttachments still name the node, then True) and
// on the Node and NodeClaim (FailedDraining with the pods still waiting once their evictions
// were asked; AwaitingVolumeDetachment). Each is written when what it says changes.
func (e *executor) watchDrain(ctx context.Context, claim *karpv1.NodeClaim, node string, log zerolog.Logger, beat func()) func(drainRound) {
	var name, uid, said, saidHeld string
	if claim != nil {
		name, uid = claim.Name, string(claim.UID)
	}
	return func(r drainRound) {
		beat()
		if len(r.Deleted) > 0 {
			tell(e.events, node, name, uid, corev1.EventTypeWarning, reasonGraceExpiring, fmt.Sprintf(
				"Deleted %d %s, each with the time left as its grace period: the termination grace period ends at %s: %s",
				len(r.Deleted), plural(len(r.Deleted), "pod", "pods"), r.Deadline.UTC().Format(time.RFC3339), listed(r.Deleted)))
		}
		if r.Held != saidHeld {
			saidHeld = r.Held
			if r.Held != "" {
				tell(e.events, node, name, uid, corev1.EventTypeNormal, reasonDisruptionBlocked, "Drain holds back: "+r.Held)
				log.Info().Str("node", node).Str("held", r.Held).Msg("drain leaves do-not-disrupt pods be")
			}
		}
		var conds []metav1.Condition
		var state string
		switch {
		case !r.PodsGone:
			msg := fmt.Sprintf("%d pods are waiting to be evicted: %s", len(r.Pods), listed(r.Pods))
			state = "pods " + msg
			if state == said {
				return
			}
			conds = append(conds, condFalse(karpv1.ConditionTypeDrained, condReasonDraining, msg))
			if r.Round > 1 { // the first round only asked for the evictions
				tell(e.events, node, name, uid, corev1.EventTypeWarning, reasonFailedDraining, "Failed to drain node, "+msg)
			} else {
				state = "" // say it again, with the event, if the next round finds the same pods
			}
		case r.Forced:
			state = "forced"
			conds = append(conds, condTrue(karpv1.ConditionTypeDrained, "Pods deleted at the termination grace period's end"))
		case len(r.Volumes) > 0:
			msg := fmt.Sprintf("Awaiting deletion of %d VolumeAttachments bound to node: %s", len(r.Volumes), listed(r.Volumes))
			state = "volumes " + msg
			if state == said {
				return
			}
			conds = append(conds, condTrue(karpv1.ConditionTypeDrained, ""),
				condFalse(karpv1.ConditionTypeVolumesDetached, condReasonAwaitingVolumes, msg))
			tell(e.events, node, "", "", corev1.EventTypeWarning, reasonAwaitingVolumes, msg)
		default:
			state = "done"
			conds = append(conds, condTrue(karpv1.ConditionTypeDrained, ""), condTrue(karpv1.ConditionTypeVolumesDetached, ""))
		}
		if state == said && state != "" {
			return
		}
		said = state
		if claim == nil {
			return
		}
		if err := e.setConditions(ctx, name, conds...); err != nil {
			log.Warn().Err(err).Msg("recording the drain on the nodeclaim")
		}
	}
}

func (e *executor) claim(ctx context.Context, name string) (*karpv1.NodeClaim, error) {
	u, err := e.k.claims.find(ctx, name)
	if u == nil || err != nil {
		return nil, err
	}
	var nc karpv1.NodeClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err != nil {
		return nil, fmt.Errorf("decoding nodeclaim %s: %w", name, err)
	}
	return &nc, nil
}

// taint puts karpenter.sh/disrupted:NoSchedule on the node, so nothing new lands on it.
func (e *executor) taint(ctx context.Context, node *corev1.Node, in *terminationv1.TerminationIntent, log zerolog.Logger) error {
	if hasDisruptedTaint(node) {
		return nil
	}
	if err := e.patchNode(ctx, node.Name, func(n *corev1.Node) {
		if !hasDisruptedTaint(n) {
			n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		}
	}); err != nil {
		return err
	}
	faultpoint.Reach(faultpoint.TerminatorAfterTaint)
	log.Info().Str("node", node.Name).Str("why", in.GetWhy()).Msg("cordoned node")
	e.event(ctx, nodesv1.NodeEventKind_NODE_EVENT_KIND_CORDONED, in, node)
	return nil
}

func (e *executor) patchNode(ctx context.Context, name string, mutate func(*corev1.Node)) error {
	_, err := e.k.nodes.modify(ctx, name, func(n *corev1.Node) bool { mutate(n); return true })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching node %s: %w", name, err)
	}
	return nil
}

// commit records the intent on the NodeClaim, makes sure the finalizer holds it, and deletes it:
// from here on the node goes. An interruption records its own deadline (when AWS takes the
// instance) first; any other termination's counts from the deletion (recordDeadline), not from
// the decision the intent carries.
func (e *executor) commit(ctx context.Context, claim *karpv1.NodeClaim, in *terminationv1.TerminationIntent, interruption bool, log zerolog.Logger) error {
	_, err := e.k.claims.modify(ctx, claim.Name, func(nc *unstructured.Unstructured) bool {
		if nc.GetDeletionTimestamp() != nil {
			return false
		}
		if !finalized(nc) {
			nc.SetFinalizers(append(nc.GetFinalizers(), karpv1.TerminationFinalizer))
		}
		a := nc.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[intentAnnotation] = in.GetIntentId()
		if at, ok := intentDeadline(in, e.now()); ok && interruption {
			a[karpv1.NodeClaimTerminationTimestampAnnotationKey] = at.UTC().Format(time.RFC3339)
		}
		nc.SetAnnotations(a)
		return true
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking nodeclaim %s for termination: %w", claim.Name, err)
	}
	if err := e.k.claims.del(ctx, claim.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting nodeclaim %s: %w", claim.Name, err)
	}
	log.Info().Str("nodeclaim", claim.Name).Str("reason", reasonName(in.GetReason())).Msg("deleting nodeclaim")
	tell(e.events, claim.Status.NodeName, claim.Name, string(claim.UID), corev1.EventTypeNormal, reasonDisruptionTerminating,
		"Disrupting node: "+reasonName(in.GetReason())+": "+in.GetWhy())
	return nil
}

// recordDeadline records a deleting claim's drain deadline on it
// (karpenter.sh/nodeclaim-termination-timestamp, as Karpenter's lifecycle controller does),
// unless it records that one or an earlier one already, and says so in a
// TerminationGracePeriodExpiring event. A redelivered or resumed intent, or another replica,
// then reads the same deadline; an interruption's earlier one replaces a later one.
func (e *executor) recordDeadline(ctx context.Context, claim *karpv1.NodeClaim, at time.Time, log zerolog.Logger) {
	if claim == nil || claim.DeletionTimestamp == nil || at.IsZero() {
		return
	}
	value := at.UTC().Format(time.RFC3339)
	wrote, err := e.k.claims.modify(ctx, claim.Name, func(nc *unstructured.Unstructured) bool {
		a := nc.GetAnnotations()
		if t, err := time.Parse(time.RFC3339, a[karpv1.NodeClaimTerminationTimestampAnnotationKey]); err == nil && !t.After(at) {
			return false
		}
		if a == nil {
			a = map[string]string{}
		}
		a[karpv1.NodeClaimTerminationTimestampAnnotationKey] = value
		nc.SetAnnotations(a)
		return true
	})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Warn().Err(err).Str("nodeclaim", claim.Name).Msg("recording the termination deadline")
		return
	}
	if wrote {
		log.Info().Str("nodeclaim", claim.Name).Str("deadline", value).Msg("recorded the termination deadline")
		tell(e.events, claim.Status.NodeName, claim.Name, string(claim.UID), corev1.EventTypeWarning, reasonGraceExpiring,
			"All pods will be deleted by "+value)
	}
}

// progress returns a function that records on a deleting NodeClaim, at most every third of
// resumeAfter, that its termination is being worked on (progressAnnotation), and by which
// intent (intentAnnotation). The decider
// publishes the termination of a deleting claim again when this goes stale: the intent
// carrying it out is gone (aged out of the stream, dead-lettered, purged) or stuck.
func (e *executor) progress(ctx context.Context, claim *karpv1.NodeClaim, in *terminationv1.TerminationIntent, log zerolog.Logger) func() {
	if claim == nil || claim.DeletionTimestamp == nil || e.resumeAfter <= 0 {
		return func() {}
	}
	var last time.Time
	if t, err := time.Parse(time.RFC3339, claim.Annotations[progressAnnotation]); err == nil {
		last = t
	}
	return func() {
		now := e.now()
		if now.Sub(last) < e.resumeAfter/3 {
			return
		}
		last = now
		_, err := e.k.claims.modify(ctx, claim.Name, func(nc *unstructured.Unstructured) bool {
			a := nc.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[progressAnnotation] = now.UTC().Format(time.RFC3339)
			a[intentAnnotation] = in.GetIntentId()
			nc.SetAnnotations(a)
			return true
		})
		if err != nil && !apierrors.IsNotFound(err) {
			log.Warn().Err(err).Str("nodeclaim", claim.Name).Msg("recording termination progress")
		}
	}
}

// errSuperseded ends, without a result, a resumed intent that finds another one working on
// its NodeClaim: the decider publishes it again should that one stop.
var errSuperseded = errors.New("another intent is carrying out this termination")

// superseded reports a resumed intent (see kube.deleting) arriving while another intent
// records progress on the claim: the resume was a false alarm (the other was only slow to be
// delivered), and going on would drain the node twice over.
func (e *executor) superseded(claim *karpv1.NodeClaim, in *terminationv1.TerminationIntent) bool {
	if claim == nil || claim.DeletionTimestamp == nil || !strings.Contains(in.GetIntentId(), resumedMark) {
		return false
	}
	owner := claim.Annotations[intentAnnotation]
	t, err := time.Parse(time.RFC3339, claim.Annotations[progressAnnotation])
	return err == nil && owner != "" && owner != in.GetIntentId() && e.now().Sub(t) < e.resumeAfter
}

// event publishes one node lifecycle step; a failure is only logged.
func (e *executor) event(ctx context.Context, kind nodesv1.NodeEventKind, in *terminationv1.TerminationIntent, node *corev1.Node) {
	ev := &nodesv1.NodeEvent{Kind: kind, NodeName: node.Name, NodeClaimName: in.GetNodeClaimName(), ProviderId: node.Spec.ProviderID,
		InstanceId: ec2v1.InstanceID(node.Spec.ProviderID), NodePoolName: in.GetNodePoolName(), EventTime: timestamppb.New(e.now()), Labels: node.Labels}
	if err := e.bus.Publish(ctx, e.prefix.Of(subject.NodesEvents), ev, ""); err != nil {
		e.log.Warn().Ctx(ctx).Err(err).Msg("publishing node event")
	}
}
