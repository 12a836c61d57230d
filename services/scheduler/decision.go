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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// A decision's steps, in Karpenter v1's order, each written so a repeat (a retried pass, a new
// leader) changes nothing: record the decision on the claims → taint their nodes
// karpenter.sh/disrupted:NoSchedule → create the replacements (fixed names) and publish their
// launch intents → wait until every replacement is Initialized → delete the old claims, which
// hands them to the terminator (drain within terminationGracePeriod counted from that deletion,
// terminate). A replacement that fails, goes away or is not initialized within
// --replacement-timeout abandons the decision: nodes untainted, replacements without a node
// deleted (registered ones kept as capacity), record removed. What comes next is disruption.Decision.Next's answer, never decided here.

// replacementName names a decision's i-th replacement after the claims it replaces, so a
// decision carried on by a new leader creates each replacement once.
func replacementName(pool string, old []*karpv1.NodeClaim, i int) string {
	uids := make([]string, len(old))
	for j, nc := range old {
		uids[j] = string(nc.UID)
	}
	sort.Strings(uids)
	sum := sha256.Sum256([]byte(strings.Join(uids, ",") + "/" + strconv.Itoa(i)))
	return pool + "-" + hex.EncodeToString(sum[:])[:10]
}

// execute makes a command a decision: the record first, then as many steps as can be taken now.
func (s *scheduler) execute(ctx context.Context, st *disruptionState, cmd command) error {
	ctx, span := tracer.Start(ctx, "scheduler.disruption.decide")
	defer span.End()
	at := st.now.UTC().Truncate(time.Second)
	d := disruption.Decision{ID: disruption.DecisionID(cmd.reason, string(cmd.old[0].UID), at), Reason: cmd.reason, Action: cmd.action,
		Claims: cmd.claimNames(), Why: cmd.why, Savings: cmd.savings, DecidedAt: at}
	for i, r := range cmd.replacements {
		d.Replacements = append(d.Replacements, replacementName(r.NodePool, cmd.old, i))
	}
	d = d.With(disruption.StepDecided, at, "")
	span.SetAttributes(attribute.String("fleetwright.reason", string(d.Reason)), attribute.String("fleetwright.action", string(d.Action)),
		attribute.StringSlice("fleetwright.nodeclaims", d.Claims), attribute.StringSlice("fleetwright.replacements", d.Replacements),
		attribute.String("fleetwright.why", d.Why), attribute.Float64("fleetwright.savings_usd_per_hour", d.Savings))
	// First the record: from now on the claims count against their budgets, and a new leader
	// carries the decision on.
	for _, nc := range cmd.old {
		if err := s.record(ctx, nc.Name, d); err != nil {
			return err
		}
		cond := metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: string(d.Reason),
			Message: d.Why, LastTransitionTime: metav1.NewTime(st.now)}
		if err := s.setCondition(ctx, nc, cond, false); err != nil {
			s.rt.Log.Warn().Ctx(ctx).Err(err).Str("nodeclaim", nc.Name).Msg("recording the disruption reason")
		}
	}
	s.metrics.decisions.WithLabelValues(string(d.Reason), string(d.Action)).Inc()
	s.metrics.karp.decided(d, cmd.pools())
	s.rt.Log.Info().Ctx(ctx).Strs("nodeclaims", d.Claims).Str("reason", string(d.Reason)).Str("action", string(d.Action)).
		Strs("replacements", d.Replacements).Float64("savings", d.Savings).Str("why", d.Why).Msg("disrupting")
	s.announce(ctx, decidedMessage(cmd.old, d))
	return s.step(ctx, st, d, cmd.replacements)
}

// advance takes every decision in flight as far as it can go now.
func (s *scheduler) advance(ctx context.Context, st *disruptionState) error {
	seen := map[string]bool{}
	var errs []error
	for _, view := range st.views {
		d, ok, err := disruption.DecisionOf(view.Claim)
		if err != nil {
			s.once("bad-decision/"+string(view.Claim.UID), func() {
				s.rt.Log.Warn().Ctx(ctx).Err(err).Msg("dropping a disruption decision that does not parse")
			})
			if view.Claim.DeletionTimestamp == nil {
				errs = append(errs, s.annotateClaim(ctx, view.Name(), disruption.DecisionAnnotation, ""))
			}
			continue
		}
		if !ok || seen[d.ID] {
			continue
		}
		seen[d.ID] = true
		errs = append(errs, s.step(ctx, st, d, nil))
	}
	return errors.Join(errs...)
}

// step takes a decision's next moves until it must wait. plans are the replacements a decision
// just made plans; a decision carried on from an earlier pass whose replacements are not
// created yet is planned again.
func (s *scheduler) step(ctx context.Context, st *disruptionState, d disruption.Decision, plans []scheduling.NodeClaim) error {
	for range 4 { // taint, launch, delete: at most three moves a pass, then wait or done
		o := s.observe(st, d)
		move, why := d.Next(o, s.cfg.ReplacementTimeout)
		switch move {
		case disruption.MoveTaint:
			if err := s.taint(ctx, o.Untainted, st); err != nil {
				return err
			}
			d = d.With(disruption.StepTainted, st.now, "")
			if err := s.recordAll(ctx, st, d); err != nil {
				return err
			}
			st.markTainted(o.Untainted)
		case disruption.MoveLaunch:
			if err := s.launch(ctx, st, d, plans); err != nil {
				return err
			}
			d = d.With(disruption.StepLaunched, st.now, strings.Join(d.Replacements, ","))
			if err := s.recordAll(ctx, st, d); err != nil {
				return err
			}
			s.tellAll(st, d, corev1.EventTypeNormal, "DisruptionLaunching",
				fmt.Sprintf("%s: %s; launching %s first", d.Reason, d.Why, strings.Join(d.Replacements, ", ")))
			return nil // the replacements show in the cache by the next pass
		case disruption.MoveWait:
			s.once("waiting/"+d.ID, func() {
				s.tellAll(st, d, corev1.EventTypeNormal, "DisruptionWaitingReadiness",
					fmt.Sprintf("waiting for %s to be initialized before %s", strings.Join(d.Replacements, ", "), strings.ToLower(string(d.Reason))))
			})
			return nil
		case disruption.MoveDelete:
			return s.deleteClaims(ctx, st, d)
		case disruption.MoveAbandon:
			return s.abandon(ctx, st, d, why)
		case disruption.MoveDone:
			return nil
		}
	}
	return nil
}

// observe reads what the decision's next move depends on.
func (s *scheduler) observe(st *disruptionState, d disruption.Decision) disruption.Observed {
	o := disruption.Observed{Now: st.now, Replacements: map[string]disruption.Replacement{}}
	for _, name := range d.Claims {
		nc, ok := st.claims[name]
		if !ok || nc.DeletionTimestamp != nil {
			o.Deleting = append(o.Deleting, name)
			continue
		}
		if nc.Status.NodeName == "" || st.tainted[name] {
			continue
		}
		if node, ok := s.cluster.Node(nc.Status.NodeName); ok && !hasDisruptedTaint(node) {
			o.Untainted = append(o.Untainted, name)
		}
	}
	for _, name := range d.Replacements {
		r, ok := st.claims[name]
		if !ok {
			if s.recent.created(name) {
				o.Replacements[name] = disruption.Replacement{Exists: true}
			}
			continue
		}
		rep := disruption.Replacement{Exists: true, Deleting: r.DeletionTimestamp != nil, Initialized: r.IsTrue(karpv1.ConditionTypeInitialized)}
		if c := r.Condition(karpv1.ConditionTypeLaunched); c != nil && c.Status == metav1.ConditionFalse {
			rep.LaunchFailed = c.Message
		}
		o.Replacements[name] = rep
	}
	return o
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}

// markTainted remembers, for the rest of the pass, nodes tainted in it (the cache catches up later).
func (st *disruptionState) markTainted(claims []string) {
	if st.tainted == nil {
		st.tainted = map[string]bool{}
	}
	for _, c := range claims {
		st.tainted[c] = true
	}
}

// taint puts karpenter.sh/disrupted:NoSchedule on the claims' nodes: nothing new lands there.
func (s *scheduler) taint(ctx context.Context, claims []string, st *disruptionState) error {
	for _, name := range claims {
		node := st.claims[name].Status.NodeName
		if err := s.editTaint(ctx, node, true); err != nil {
			return err
		}
		s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", name).Str("node", node).Msg("tainted node " + karpv1.DisruptedTaintKey + ":NoSchedule")
	}
	return nil
}

// editTaint adds (or removes) the disrupted taint on a node, from a fresh read, retrying on
// conflicts; a node gone is no error.
func (s *scheduler) editTaint(ctx context.Context, node string, add bool) error {
	wctx, done, err := s.fence(ctx, "node_taint")
	if err != nil {
		return err
	}
	defer done()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.rt.Kube.CoreV1().Nodes().Get(wctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hasDisruptedTaint(n) == add {
			return nil
		}
		var taints []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != karpv1.DisruptedTaintKey {
				taints = append(taints, t)
			}
		}
		if add {
			taints = append(taints, karpv1.DisruptedNoScheduleTaint)
		}
		n.Spec.Taints = taints
		_, err = s.rt.Kube.CoreV1().Nodes().Update(wctx, n, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err = s.cut(wctx, "node_taint", err); err != nil {
		return fmt.Errorf("tainting node %s: %w", node, err)
	}
	return nil
}

// launch creates the decision's replacements (once each: fixed names) and publishes their launch
// intents. Without the plans (a decision carried on from an earlier pass) they are planned again
// from the old claims' pods.
func (s *scheduler) launch(ctx context.Context, st *disruptionState, d disruption.Decision, plans []scheduling.NodeClaim) error {
	var old []*karpv1.NodeClaim
	for _, name := range d.Claims {
		if nc, ok := st.claims[name]; ok {
			old = append(old, nc)
		}
	}
	if len(plans) != len(d.Replacements) {
		pods, others := s.without(st, old...)
		plan, err := scheduling.Solve(s.input(st.v, others, pods))
		if err != nil {
			return fmt.Errorf("planning the replacements of %v: %w", d.Claims, err)
		}
		if len(plan.NodeClaims) != len(d.Replacements) {
			return s.abandon(ctx, st, d, fmt.Sprintf("its pods now need %d new node(s), not %d", len(plan.NodeClaims), len(d.Replacements)))
		}
		plans = plan.NodeClaims
	}
	for i, r := range plans {
		if err := s.launchReplacement(ctx, st, r, d.Replacements[i], d.Claims, karpmetrics.LowerReason(d.Reason)); err != nil {
			return err
		}
	}
	return nil
}

// launchReplacement creates a replacement claim (once: it has a fixed name) and publishes its
// launch intent.
//
// karpReason is the claim's reason in karpenter_nodeclaims_created_total: the decision's reason
// in lower case, or createdProvisioned for an interrupted node's, whose pods Karpenter would
// provision anew.
func (s *scheduler) launchReplacement(ctx context.Context, st *disruptionState, r scheduling.NodeClaim, name string, replaces []string,
	karpReason string,
) error {
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
	s.recent.addClaim(nc.Name)
	s.metrics.claimCreated(createdForDisruption, karpReason, r.NodePool)
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

// deleteClaims deletes the decision's claims: the point of no return. The terminator drains
// each node within its terminationGracePeriod, counted from this deletion, and terminates it.
func (s *scheduler) deleteClaims(ctx context.Context, st *disruptionState, d disruption.Decision) error {
	ctx, span := tracer.Start(ctx, "scheduler.disruption.terminate")
	defer span.End()
	span.SetAttributes(attribute.StringSlice("fleetwright.nodeclaims", d.Claims), attribute.String("fleetwright.decision", d.ID))
	if len(d.Replacements) > 0 {
		d = d.With(disruption.StepInitialized, st.now, "")
	}
	d = d.With(disruption.StepDeleted, st.now, "")
	if err := s.recordAll(ctx, st, d); err != nil {
		return err
	}
	for _, name := range d.Claims {
		nc, ok := st.claims[name]
		if !ok || nc.DeletionTimestamp != nil {
			continue
		}
		wctx, done, err := s.fence(ctx, "nodeclaim_delete")
		if err != nil {
			return err
		}
		// The claim's UID as a precondition: a claim of the same name made since is not this one.
		err = s.claims.Delete(wctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &nc.UID}})
		done()
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting nodeclaim %s: %w", name, err)
		}
		msg := fmt.Sprintf("%s: %s", d.Reason, d.Why)
		if len(d.Replacements) > 0 {
			msg = fmt.Sprintf("%s initialized; deleting: %s", strings.Join(d.Replacements, ", "), msg)
		}
		s.once("terminating/"+d.ID+"/"+name, func() {
			s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", name).Str("decision", d.ID).Msg(msg)
			if n := len(d.Claims); n > 0 {
				s.metrics.savings.Add(d.Savings / float64(n)) // each old claim its share
			}
			s.metrics.karp.claimDisrupted(d, nc)
			s.tell(nc, nc.Status.NodeName, corev1.EventTypeNormal, "DisruptionTerminating", msg)
			s.announce(ctx, terminatingMessage(nc, d))
		})
	}
	return nil
}

// abandon gives a decision up: its nodes untainted (first: a leader dying here leaves the record,
// and the next abandons again), its replacements that have no node yet deleted (those whose node
// registered are kept, as Karpenter keeps them), the record and the DisruptionReason condition
// removed, so nothing is left tainted or counted against a budget.
func (s *scheduler) abandon(ctx context.Context, st *disruptionState, d disruption.Decision, why string) error {
	var errs []error
	for _, name := range d.Claims {
		if nc, ok := st.claims[name]; ok && nc.Status.NodeName != "" {
			errs = append(errs, s.editTaint(ctx, nc.Status.NodeName, false))
		}
	}
	for _, name := range d.Replacements {
		if rep, ok := st.claims[name]; ok && rep.Status.NodeName != "" && rep.DeletionTimestamp == nil {
			// Registered: a node of the cluster now, kept as Karpenter keeps it, as capacity like
			// any other (no longer a replacement: emptiness and consolidation judge it).
			if err := s.annotateClaim(ctx, name, replacesAnnotation, ""); err != nil {
				errs = append(errs, fmt.Errorf("keeping replacement %s: %w", name, err))
			}
			continue
		}
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
	for _, name := range d.Claims {
		nc, ok := st.claims[name]
		if !ok {
			continue
		}
		if err := s.annotateClaim(ctx, name, disruption.DecisionAnnotation, ""); err != nil {
			return err
		}
		if err := s.setCondition(ctx, nc, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason}, true); err != nil {
			s.rt.Log.Warn().Ctx(ctx).Err(err).Str("nodeclaim", name).Msg("clearing the disruption reason")
		}
		msg := fmt.Sprintf("abandoned %s of this node: %s", strings.ToLower(string(d.Reason)), why)
		s.tell(nc, nc.Status.NodeName, corev1.EventTypeWarning, "DisruptionAbandoned", msg)
		s.announce(ctx, abandonedMessage(nc, d.With(disruption.StepAbandoned, st.now, why), why))
	}
	s.metrics.abandoned.WithLabelValues(string(d.Reason)).Inc()
	s.metrics.karp.abandoned(d)
	s.rt.Log.Warn().Ctx(ctx).Strs("nodeclaims", d.Claims).Strs("replacements", d.Replacements).Str("why", why).Msg("abandoned disruption")
	return nil
}

// expire deletes every claim past its expireAfter: forceful, as Karpenter v1's expiration, so no
// budget holds it back and nothing is launched first; the drain that follows is bounded by the
// claim's terminationGracePeriod, which do-not-disrupt pods and PodDisruptionBudgets wait out. A
// v1alpha5 Provisioner's claims keep its semantics: a do-not-disrupt pod holds their expiry back.
func (s *scheduler) expire(ctx context.Context, st *disruptionState) error {
	var errs []error
	for _, view := range st.views {
		nc := view.Claim
		expired, due := disruption.Expired(nc, st.now)
		if !expired || nc.DeletionTimestamp != nil {
			continue
		}
		if view.Pool != nil && view.Pool.Legacy {
			if cause, why, held := disruption.Blocker(view.Pods, nil, nil, st.now, nil); held {
				s.blocked(ctx, st, nc, disruption.ReasonExpired, cause, "expired node not removed (v1alpha5): "+why)
				continue
			}
		}
		if d, ok, _ := disruption.DecisionOf(nc); ok && d.Reason == disruption.ReasonExpired {
			errs = append(errs, s.deleteClaims(ctx, st, d))
			continue
		}
		at := st.now.UTC().Truncate(time.Second)
		d := disruption.Decision{ID: disruption.DecisionID(disruption.ReasonExpired, string(nc.UID), due), Reason: disruption.ReasonExpired,
			Action: disruption.ActionDelete, Claims: []string{nc.Name}, DecidedAt: at,
			Why: fmt.Sprintf("expired %s after creation (expireAfter %s)", st.now.Sub(nc.CreationTimestamp.Time).Round(time.Second),
				karpv1.FormatDuration(*nc.Spec.ExpireAfter.Duration))}
		d = d.With(disruption.StepDecided, at, "")
		s.metrics.decisions.WithLabelValues(string(d.Reason), string(d.Action)).Inc()
		s.announce(ctx, decidedMessage([]*karpv1.NodeClaim{nc}, d))
		errs = append(errs, s.deleteClaims(ctx, st, d))
	}
	return errors.Join(errs...)
}

// record writes the decision on one claim.
func (s *scheduler) record(ctx context.Context, claim string, d disruption.Decision) error {
	return s.annotateClaim(ctx, claim, disruption.DecisionAnnotation, d.Value())
}

// recordAll writes the decision, with its latest step, on every claim of it still there.
func (s *scheduler) recordAll(ctx context.Context, st *disruptionState, d disruption.Decision) error {
	for _, name := range d.Claims {
		if _, ok := st.claims[name]; ok {
			if err := s.record(ctx, name, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// tellAll records an event on every claim of the decision and its node.
func (s *scheduler) tellAll(st *disruptionState, d disruption.Decision, eventType, reason, msg string) {
	for _, name := range d.Claims {
		if nc, ok := st.claims[name]; ok {
			s.tell(nc, nc.Status.NodeName, eventType, reason, msg)
		}
	}
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

// markConsolidatable keeps Karpenter's Consolidatable condition: True on the initialized claims
// of consolidating pools whose consolidateAfter has passed since their last pod event (the
// claim's status.lastPodEventTime), removed otherwise.
func (s *scheduler) markConsolidatable(ctx context.Context, st *disruptionState) error {
	ready := map[string]bool{}
	for _, c := range st.cands {
		ready[c.Name()] = c.Consolidatable
	}
	for _, view := range st.views {
		nc := view.Claim
		if nc.DeletionTimestamp != nil || view.Pool == nil {
			continue
		}
		ok := ready[nc.Name]
		var err error
		switch has := nc.IsTrue(karpv1.ConditionTypeConsolidatable); {
		case ok && !has:
			err = s.setCondition(ctx, nc, metav1.Condition{Type: karpv1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue,
				Reason: "Consolidatable", Message: "no pod arrived on or left the node for its pool's consolidateAfter",
				LastTransitionTime: metav1.NewTime(st.now)}, false)
		case !ok && nc.Condition(karpv1.ConditionTypeConsolidatable) != nil:
			err = s.setCondition(ctx, nc, metav1.Condition{Type: karpv1.ConditionTypeConsolidatable}, true)
		}
		if err != nil {
			s.rt.Log.Warn().Ctx(ctx).Err(err).Str("nodeclaim", nc.Name).Msg("updating the Consolidatable condition")
		}
	}
	return nil
}

// tell records an event on the NodeClaim and, when there is one, its Node.
func (s *scheduler) tell(nc *karpv1.NodeClaim, node, eventType, reason, msg string) {
	s.recorder.Event(nc, eventType, reason, msg)
	if node != "" {
		ref := &corev1.ObjectReference{Kind: "Node", Name: node, UID: "", APIVersion: "v1"}
		if n, ok := s.cluster.Node(node); ok {
			ref.UID = n.UID
		}
		s.recorder.Event(ref, eventType, reason, msg)
	}
}

// once runs f the first time key is seen (bounded: the memory is cleared when it grows large,
// at worst repeating a log line and an event).
func (s *scheduler) once(key string, f func()) {
	s.onceMu.Lock()
	if s.seen == nil || len(s.seen) > 10000 {
		s.seen = map[string]time.Time{}
	}
	_, done := s.seen[key]
	if !done {
		s.seen[key] = s.now()
	}
	s.onceMu.Unlock()
	if !done {
		f()
	}
}
