package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// decisionKey is the annotation that records a disruption decision on the claims it removes.
const decisionKey = disruption.DecisionAnnotation

// decision is what decisionKey holds: why the claim goes, and which claims must be initialized
// before its node is drained. It is the durable record of the decision: a new leader picks it
// up where the last one stopped.
type decision struct {
	Reason       karpv1.DisruptionReason `json:"reason"`
	Action       string                  `json:"action"`
	Replacements []string                `json:"replacements,omitempty"`
	DecidedAt    time.Time               `json:"decidedAt"`
	Why          string                  `json:"why"`
	Savings      float64                 `json:"savingsUSDPerHour,omitempty"`
	Nodes        int                     `json:"nodes"` // how many claims the decision removes
}

// decisionSpec is a decision about to be made.
type decisionSpec struct {
	reason       karpv1.DisruptionReason
	action       string
	old          []*karpv1.NodeClaim
	replacements []scheduling.NodeClaim
	why          string
	savings      float64
}

// replacementName names a decision's i-th replacement after the claims it replaces, so a
// decision made twice (a leader change between its steps) creates each replacement once.
func replacementName(pool string, old []*karpv1.NodeClaim, i int) string {
	uids := make([]string, len(old))
	for j, nc := range old {
		uids[j] = string(nc.UID)
	}
	sort.Strings(uids)
	sum := sha256.Sum256([]byte(strings.Join(uids, ",") + "/" + strconv.Itoa(i)))
	return pool + "-" + hex.EncodeToString(sum[:])[:10]
}

// decide records the decision on the old claims, then creates the replacements (if any) and
// publishes their launch intents. Without replacements the old nodes are terminated at once;
// with them, advance terminates them once every replacement is initialized.
func (s *scheduler) decide(ctx context.Context, st *disruptionState, d decisionSpec) error {
	ctx, span := tracer.Start(ctx, "scheduler.disruption.decide")
	defer span.End()
	rec := decision{Reason: d.reason, Action: d.action, DecidedAt: st.now.UTC().Truncate(time.Second), Why: d.why, Savings: d.savings,
		Nodes: len(d.old)}
	for i, r := range d.replacements {
		rec.Replacements = append(rec.Replacements, replacementName(r.NodePool, d.old, i))
	}
	var names []string
	for _, nc := range d.old {
		names = append(names, nc.Name)
	}
	span.SetAttributes(attribute.String("fleetwright.reason", string(d.reason)), attribute.String("fleetwright.action", d.action),
		attribute.StringSlice("fleetwright.nodeclaims", names), attribute.StringSlice("fleetwright.replacements", rec.Replacements),
		attribute.String("fleetwright.why", d.why), attribute.Float64("fleetwright.savings_usd_per_hour", d.savings))
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	// First the record: from now on the claims count against their budgets.
	for _, nc := range d.old {
		if err := s.annotateClaim(ctx, nc.Name, decisionKey, string(raw)); err != nil {
			return err
		}
	}
	for _, nc := range d.old {
		// Karpenter's condition: the claim is being disrupted, and why (best effort: the
		// annotation is the record).
		cond := metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: string(d.reason),
			Message: d.why, LastTransitionTime: metav1.NewTime(st.now)}
		if err := s.setCondition(ctx, nc, cond, false); err != nil {
			s.rt.Log.Warn().Ctx(ctx).Err(err).Str("nodeclaim", nc.Name).Msg("recording the disruption reason")
		}
	}
	s.metrics.decisions.WithLabelValues(string(d.reason), d.action).Inc()
	log := s.rt.Log.Info().Ctx(ctx).Strs("nodeclaims", names).Str("reason", string(d.reason)).Str("action", d.action).
		Strs("replacements", rec.Replacements).Float64("savings", d.savings).Str("why", d.why)
	log.Msg("disrupting")
	s.announce(ctx, decidedMessage(d.old, rec))
	if len(rec.Replacements) > 0 {
		// A delete is told once, by terminate (DisruptionTerminating).
		for _, nc := range d.old {
			msg := fmt.Sprintf("%s: %s; launching %s first", d.reason, d.why, strings.Join(rec.Replacements, ", "))
			s.tell(nc, nc.Status.NodeName, corev1.EventTypeNormal, "DisruptionLaunching", msg)
		}
	}
	for i, r := range d.replacements {
		if err := s.launchReplacement(ctx, st, r, rec.Replacements[i], names); err != nil {
			return err
		}
	}
	if len(rec.Replacements) == 0 {
		for _, nc := range d.old {
			if err := s.terminate(ctx, nc, rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// launchReplacement creates a replacement claim (once: it has a fixed name) and publishes its
// launch intent.
func (s *scheduler) launchReplacement(ctx context.Context, st *disruptionState, r scheduling.NodeClaim, name string, replaces []string) error {
	p, ok := st.v.pool(r.NodePool)
	if !ok {
		return fmt.Errorf("replacing: nodepool %q is gone", r.NodePool)
	}
	nc, err := s.createClaim(ctx, r, p, "disruption", func(obj *karpv1.NodeClaim) {
		obj.GenerateName, obj.Name = "", name
		obj.Annotations[replacesAnnotation] = strings.Join(replaces, ",")
	})
	if apierrors.IsAlreadyExists(err) {
		existing, ok := s.cluster.Claim(name)
		if !ok {
			return nil // the next pass sees it in the cache
		}
		nc, err = existing, nil
	}
	if err != nil {
		return err
	}
	s.metrics.claims.WithLabelValues(createdForDisruption, r.NodePool).Inc()
	s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", nc.Name).Str("nodepool", r.NodePool).Strs("replaces", replaces).
		Strs("instance-types", firstN(r.InstanceTypes, 5)).Float64("price", r.PriceUSDPerHour).Msg("created replacement nodeclaim")
	return s.publishIntent(ctx, created{state: claimStateOf(nc)}, st.v, "disruption")
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// advance moves every decision in flight on: once all its replacements are initialized the old
// claim's node is drained and terminated (the terminator carries it out); a replacement that
// failed, went away or did not initialize within --replacement-timeout abandons the decision:
// the replacements are deleted and the old claim is left as it was. It reports whether a
// decision is still in flight.
func (s *scheduler) advance(ctx context.Context, st *disruptionState) (bool, error) {
	inFlight := false
	var errs []error
	for _, nc := range st.claims {
		raw := nc.Annotations[decisionKey]
		if raw == "" {
			continue
		}
		// Any decision in flight holds the next consolidation back, until its old node is gone:
		// the replacements' room is promised to the old nodes' pods.
		inFlight = true
		if nc.DeletionTimestamp != nil {
			continue // the terminator has it
		}
		var rec decision
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			s.rt.Log.Warn().Ctx(ctx).Str("nodeclaim", nc.Name).Err(err).Msg("dropping a disruption decision that does not parse")
			errs = append(errs, s.annotateClaim(ctx, nc.Name, decisionKey, ""))
			continue
		}
		ready, failed := true, ""
		for _, name := range rec.Replacements {
			r, ok := st.claims[name]
			switch {
			case !ok && st.now.Sub(rec.DecidedAt) > 30*time.Second:
				failed = "replacement " + name + " is gone"
			case !ok:
				ready = false
			case r.DeletionTimestamp != nil:
				failed = "replacement " + name + " is being deleted"
			case r.Condition(karpv1.ConditionTypeLaunched) != nil && !r.IsTrue(karpv1.ConditionTypeLaunched):
				failed = "replacement " + name + " failed to launch: " + r.Condition(karpv1.ConditionTypeLaunched).Message
			case !r.IsTrue(karpv1.ConditionTypeInitialized):
				ready = false
			}
		}
		if failed == "" && st.now.Sub(rec.DecidedAt) > s.cfg.ReplacementTimeout {
			if ready {
				failed = fmt.Sprintf("the node was not taken away within %s", s.cfg.ReplacementTimeout)
			} else {
				failed = fmt.Sprintf("replacements not initialized within %s", s.cfg.ReplacementTimeout)
			}
		}
		switch {
		case failed != "":
			errs = append(errs, s.abandon(ctx, nc, rec, failed))
		case ready:
			errs = append(errs, s.terminate(ctx, nc, rec))
		}
	}
	return inFlight, errors.Join(errs...)
}

// terminate publishes the old claim's termination intent (once per decision: its id is
// deterministic, and JetStream drops a repeat).
func (s *scheduler) terminate(ctx context.Context, nc *karpv1.NodeClaim, rec decision) error {
	reason := commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED
	if rec.Reason == karpv1.DisruptionReasonDrifted {
		reason = commonv1.TerminationReason_TERMINATION_REASON_DRIFTED
	}
	id := fmt.Sprintf("%s/%s/%d", nc.UID, strings.ToLower(string(rec.Reason)), rec.DecidedAt.Unix())
	in := &terminationv1.TerminationIntent{IntentId: id, NodeClaimName: nc.Name, NodeName: nc.Status.NodeName,
		InstanceId: ec2v1.InstanceID(nc.Status.ProviderID), ProviderId: nc.Status.ProviderID, NodePoolName: claimPool(nc),
		Reason: reason, Voluntary: true, RequestTime: timestamppb.New(rec.DecidedAt), Why: rec.Why,
		ReplacementNodeClaimNames: rec.Replacements}
	if g := nc.Spec.TerminationGracePeriod; g != nil {
		in.GracePeriod = durationpb.New(g.Duration)
	}
	ctx, span := tracer.Start(ctx, "scheduler.disruption.terminate")
	defer span.End()
	span.SetAttributes(attribute.String("fleetwright.nodeclaim", nc.Name), attribute.String("fleetwright.intent", id))
	wctx, done, err := s.fence(ctx, "termination_intent")
	if err != nil {
		return err
	}
	defer done()
	if err := s.rt.Bus.Publish(wctx, s.rt.Bus.Prefix().Of(subject.TerminationsIntents), in, id); err != nil {
		return fmt.Errorf("publishing termination intent for %s: %w", nc.Name, err)
	}
	s.once("terminate/"+id, func() {
		msg := fmt.Sprintf("%s: %s", rec.Reason, rec.Why)
		if len(rec.Replacements) > 0 {
			msg = fmt.Sprintf("%s initialized; draining: %s", strings.Join(rec.Replacements, ", "), msg)
		}
		s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", nc.Name).Str("intent", id).Msg(msg)
		if rec.Nodes > 0 {
			s.metrics.savings.Add(rec.Savings / float64(rec.Nodes)) // each old claim its share
		}
		s.tell(nc, nc.Status.NodeName, corev1.EventTypeNormal, "DisruptionTerminating", msg)
		s.announce(ctx, terminatingMessage(nc, rec))
	})
	return nil
}

// abandon gives a decision up: its replacements are deleted and the old claim's record removed,
// so it no longer counts against its budget and nothing is left tainted (the terminator never
// touched it).
func (s *scheduler) abandon(ctx context.Context, nc *karpv1.NodeClaim, rec decision, why string) error {
	var errs []error
	for _, name := range rec.Replacements {
		wctx, done, err := s.fence(ctx, "nodeclaim_delete")
		if err != nil {
			return err
		}
		err = s.claims.Delete(wctx, name, metav1.DeleteOptions{})
		done()
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting replacement %s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := s.annotateClaim(ctx, nc.Name, decisionKey, ""); err != nil {
		return err
	}
	if latest, ok := s.cluster.Claim(nc.Name); ok {
		if err := s.setCondition(ctx, latest, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason}, true); err != nil {
			s.rt.Log.Warn().Ctx(ctx).Err(err).Str("nodeclaim", nc.Name).Msg("clearing the disruption reason")
		}
	}
	s.metrics.abandoned.WithLabelValues(string(rec.Reason)).Inc()
	msg := fmt.Sprintf("abandoned %s of this node: %s", strings.ToLower(string(rec.Reason)), why)
	s.rt.Log.Warn().Ctx(ctx).Str("nodeclaim", nc.Name).Strs("replacements", rec.Replacements).Msg(msg)
	s.tell(nc, nc.Status.NodeName, corev1.EventTypeWarning, "DisruptionAbandoned", msg)
	s.announce(ctx, abandonedMessage(nc, rec, why))
	return nil
}

// annotateClaim sets (or, with "", removes) one annotation on a NodeClaim.
func (s *scheduler) annotateClaim(ctx context.Context, name, key, value string) error {
	v := any(value)
	if value == "" {
		v = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	if err != nil {
		return err
	}
	return s.writeClaim(ctx, "nodeclaim_annotation", "annotating nodeclaim "+name, false, func(wctx context.Context) error {
		_, err := s.claims.Patch(wctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// setCondition sets (or, with remove, removes) a condition on a NodeClaim's status, from the
// cached object: a conflict (it changed since) is left for the next pass.
func (s *scheduler) setCondition(ctx context.Context, nc *karpv1.NodeClaim, c metav1.Condition, remove bool) error {
	cur := nc.DeepCopy()
	if remove {
		if !meta.RemoveStatusCondition(&cur.Status.Conditions, c.Type) {
			return nil
		}
	} else if !cur.SetCondition(c) {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cur)
	if err != nil {
		return err
	}
	doing := fmt.Sprintf("updating the %s condition of nodeclaim %s", c.Type, nc.Name)
	return s.writeClaim(ctx, "nodeclaim_condition", doing, true, func(wctx context.Context) error {
		_, err := s.claims.UpdateStatus(wctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
		return err
	})
}

// writeClaim makes one write to a NodeClaim under fence(write). A claim gone since is no error,
// nor, with changedOK, one changed since; any other is wrapped as doing.
func (s *scheduler) writeClaim(ctx context.Context, write, doing string, changedOK bool, w func(context.Context) error) error {
	wctx, done, err := s.fence(ctx, write)
	if err != nil {
		return err
	}
	defer done()
	err = w(wctx)
	if apierrors.IsNotFound(err) || changedOK && apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	return nil
}
