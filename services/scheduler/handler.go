package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/clock"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

var tracer = otel.Tracer("github.com/fleetwright/fleetwright/services/scheduler")

// noNodePool is the reason given to pods when no NodePool (or Provisioner) exists at all.
const noNodePool = "no NodePool exists, and no existing node can take it"

// handle schedules one batch of pending pods: drop the pods that stopped being pending or are
// nominated already, solve, create a NodeClaim per planned claim and nominate its pods, tell
// the unplaceable pods why, publish one LaunchIntent per NodeClaim. Only then is the batch
// acked; a redelivery finds the pods nominated and does nothing again.
func (s *scheduler) handle(ctx context.Context, batch *podsv1.PendingPodBatch, d bus.Delivery) error {
	ctx, span := tracer.Start(ctx, "scheduler.solve")
	defer span.End()
	log := s.rt.Log.With().Ctx(ctx).Str("batch", batch.GetBatchId()).Logger()
	if d.Attempt > 1 {
		log = log.With().Uint64("attempt", d.Attempt).Logger()
	}
	pods, kube, awaited := s.provisionable(ctx, batch)
	span.SetAttributes(attribute.Int("fleetwright.pods", len(pods)), attribute.String("fleetwright.batch_id", batch.GetBatchId()))
	if s.unpublished(awaited) {
		// Pods of the batch wait on a claim no batch of this replica published: an earlier
		// delivery's, whose create went through though its answer was lost.
		if v, err := s.read(); err == nil {
			s.publishAdopted(ctx, awaited, v, log)
		}
	}
	if len(pods) == 0 {
		log.Debug().Int("offered", len(batch.GetPods())).Msg("no provisionable pods left in batch")
		s.metrics.batches.WithLabelValues("nothing_to_do").Inc()
		return nil
	}
	log.Info().Msgf("found %d provisionable pod(s)", len(pods))
	start := s.now()

	v, err := s.read()
	if err != nil {
		s.fail(span, "error", err)
		return fmt.Errorf("reading cluster state: %w", err)
	}
	nodes, pods := gather(func() []scheduling.Node { return s.nodes(v) }, func() []scheduling.Pod { return s.stillPending(pods) })
	if pods = s.heldBack(pods, kube, v, log); len(pods) == 0 {
		log.Debug().Msg("every pod was bound while the cluster was read, or is held back by the launch-loop breaker")
		s.metrics.batches.WithLabelValues("nothing_to_do").Inc()
		return nil
	}
	plan, err := scheduling.Solve(s.input(v, nodes, pods))
	if err != nil {
		s.fail(span, "error", err)
		return fmt.Errorf("solving: %w", err)
	}
	s.metrics.solveSeconds.Observe(s.now().Sub(start).Seconds())
	s.metrics.karp.scheduling.WithLabelValues(karpmetrics.ControllerProvisioner).Observe(s.now().Sub(start).Seconds())
	s.metrics.karp.unschedulable.WithLabelValues(karpmetrics.ControllerProvisioner).Set(float64(len(plan.Unschedulable)))
	s.metrics.karp.solved(pods, batch.GetWindowOpenTime().AsTime(), s.now())
	placed := 0
	for _, c := range plan.NodeClaims {
		placed += len(c.PodUIDs)
	}
	log.Info().Dur("duration", s.now().Sub(start)).Msgf("computed %d new nodeclaim(s) to fit %d pod(s)", len(plan.NodeClaims), placed)
	if len(plan.Placements) > 0 {
		log.Info().Msgf("computed %d existing or in-flight node(s) will fit %d pod(s)", targets(plan.Placements), len(plan.Placements))
	}

	claims, err := s.createClaims(ctx, plan, v, kube, batch.GetBatchId(), log)
	if err != nil {
		// The claims written exist: the batch's retry counts them as capacity in flight and
		// nominates its pods to them, but would not publish their intents, and the reconcile
		// loop only would, an interval later. Publish them now (the launcher reads the claim,
		// not the pods an intent names).
		for _, c := range claims {
			if perr := s.publishIntent(ctx, c, v, "batch"); perr != nil {
				log.Warn().Err(perr).Msg("publishing the launch intent of a claim of a failed batch; the reconcile loop will")
			}
		}
		s.fail(span, failure(err), err)
		return err
	}
	if err := s.nominateExisting(ctx, plan.Placements, v, kube, log); err != nil {
		s.fail(span, failure(err), err)
		return err
	}
	s.publishAdopted(ctx, targetsOf(plan.Placements), v, log)
	s.reportUnschedulable(plan.Unschedulable, v, kube, log)
	for _, p := range plan.PoolsWithoutTypes {
		if pv, ok := v.pool(p.NodePool); ok && !pv.legacy {
			noCompatibleInstanceTypes(s.recorder, p.NodePool, pv.uid, p.MinValues)
		}
	}
	if len(claims) > 0 {
		faultpoint.Reach(faultpoint.SchedulerBeforePublish)
	}
	for _, c := range claims {
		if err := s.publishIntent(ctx, c, v, "batch"); err != nil {
			s.fail(span, failure(err), err)
			return err
		}
	}
	s.metrics.podsScheduled.Add(float64(placed + len(plan.Placements)))
	s.metrics.podsUnsched.Add(float64(len(plan.Unschedulable)))
	outcome := "scheduled"
	if len(plan.NodeClaims) == 0 && len(plan.Placements) == 0 {
		outcome = "unschedulable"
	}
	s.metrics.batches.WithLabelValues(outcome).Inc()
	span.SetAttributes(attribute.Int("fleetwright.claims", len(claims)), attribute.Float64("fleetwright.price_usd_per_hour", plan.CostUSDPerHour()),
		attribute.StringSlice("fleetwright.pools", poolsOf(plan)), attribute.StringSlice("fleetwright.instance_types", chosenTypes(plan)),
		attribute.Int("fleetwright.unschedulable", len(plan.Unschedulable)))
	return nil
}

// failure is a failed batch's outcome: fenced when this replica stopped because it no longer
// leads (the batch is handed back, for the leader to handle), else error.
func failure(err error) string {
	if errors.Is(err, errFenced) {
		return "fenced"
	}
	return "error"
}

func (s *scheduler) fail(span trace.Span, outcome string, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	s.metrics.batches.WithLabelValues(outcome).Inc()
}

// provisionable returns the batch's pods that still need capacity, projected from the cached Pods,
// and judged by the informer cache: still pending, not nominated to a NodeClaim that exists, each pod once. Alongside, the
// Kubernetes pods by UID for annotating and events. The cache may lag the pod-watcher's: a pod
// the cache does not show as pending yet (absent, or not yet marked unschedulable) is waited
// for, up to --cache-wait; a pod the cache shows bound, deleted, finished or nominated is
// dropped at once.
func (s *scheduler) provisionable(ctx context.Context, batch *podsv1.PendingPodBatch) ([]scheduling.Pod, map[string]*corev1.Pod, map[string]bool) {
	kube := map[string]*corev1.Pod{}
	awaited := map[string]bool{} // claims the batch's pods wait on (live nominations)
	var order []*podsv1.PodProjection
	waiting := map[string]*podsv1.PodProjection{}
	for _, p := range batch.GetPods() {
		if _, dup := waiting[p.GetUid()]; !dup {
			waiting[p.GetUid()] = p
			order = append(order, p)
		}
	}
	deadline := s.now().Add(s.cfg.CacheWait)
	ended := 0
	for {
		for uid, p := range waiting {
			pod, verdict, again, claim := s.classify(p)
			if again {
				ended++
			}
			if claim != "" {
				awaited[claim] = true
			}
			switch verdict {
			case podProvisionable:
				kube[uid] = pod
				delete(waiting, uid)
			case podDone:
				delete(waiting, uid)
			}
		}
		if len(waiting) == 0 || !s.now().Before(deadline) || ctx.Err() != nil {
			break
		}
		clock.Sleep(ctx, 50*time.Millisecond)
	}
	if ended > 0 {
		s.rt.Log.Info().Ctx(ctx).Str("batch", batch.GetBatchId()).Msgf("scheduling %d pod(s) again: their nomination ended (see their FailedScheduling events)", ended)
	}
	// The pods are solved as the API server has them (the cache, projected as pod-watcher
	// projects them), not as the message says: a batch names pods, it does not define them.
	var out []scheduling.Pod
	for _, p := range order {
		if pod := kube[p.GetUid()]; pod != nil {
			out = append(out, corePod(podproj.Project(pod, s.cluster.Volumes)))
		}
	}
	return out, kube, awaited
}

type podVerdict int

const (
	podProvisionable podVerdict = iota
	podDone                     // bound, gone, finished or nominated: nothing to do
	podNotYet                   // the cache has not caught up with the batch
)

// classify judges one pod of a batch by the cache; again reports a provisionable pod whose
// nomination ended (it is told why in an event), awaited the claim a pending pod's live
// nomination holds room on.
func (s *scheduler) classify(p *podsv1.PodProjection) (pod *corev1.Pod, verdict podVerdict, again bool, awaited string) {
	pod, ok := s.cluster.Pod(p.GetNamespace(), p.GetName())
	switch {
	case !ok:
		return nil, podNotYet, false, ""
	case string(pod.UID) != p.GetUid():
		return nil, podDone, false, "" // replaced by a pod of the same name
	}
	if pending, _, _ := s.cfg.Early.Pending(pod, s.now()); pending {
		nom := s.nomination(pod)
		if nom.Live {
			return nil, podDone, false, nom.Claim // room is planned for it already
		}
		again = nom.Expired != "" && s.recent.announce(string(pod.UID), nom.Claim, nom.At)
		if again { // told once per ended nomination, not at every resync while it stays pending
			s.metrics.nominationsEnded.Inc()
			offeredAgain(s.recorder, pod, nom.Expired)
		}
		return pod, podProvisionable, again, ""
	}
	unbound := pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
	if unbound && !podproj.Unschedulable(pod) {
		return nil, podNotYet, false, ""
	}
	return nil, podDone, false, ""
}

// unpublished reports whether any of the claims is cached as not launched yet and was not
// written by this replica, whose batches publish the intents of their own claims.
func (s *scheduler) unpublished(claims map[string]bool) bool {
	for name := range claims {
		if nc, ok := s.cluster.Claim(name); ok && s.unlaunchedForeign(claimStateOf(nc)) {
			return true
		}
	}
	return false
}

// nomination judges the pod's nomination by the one rule pod-watcher also applies: as the
// NodeClaims record it, or the nomination this replica made moments ago if the cache does not show it
// yet; a claim this replica created and the cache does not show yet is in flight.
func (s *scheduler) nomination(pod *corev1.Pod) podproj.Nomination {
	rec := s.cluster.NominationOf(string(pod.UID))
	if n, ok := s.recent.nomination(string(pod.UID)); ok && (rec.Claim == "" || n.at.After(rec.At)) {
		return s.cfg.Nomination.Judge(n.claim, n.at, s.claimOrRecent, s.now()) // newer than the cache shows
	}
	return s.cfg.Nomination.JudgeNomination(rec, s.claimOrRecent, s.now())
}

// claimOrRecent looks a NodeClaim up in the cache, or among those this replica created.
func (s *scheduler) claimOrRecent(name string) (podproj.Claim, bool) {
	if c, ok := s.cluster.NominationClaim(name); ok {
		return c, true
	}
	return podproj.Claim{Name: name}, s.recent.created(name)
}

// liveNominations returns the pending pods whose nomination to the claim holds now: the room
// planned for them is taken. Besides the pods the cache shows nominated to it, that includes
// those this replica nominated moments ago that the cache does not show so yet, so a batch
// handled right after the one that planned the claim does not see its room as free.
func (s *scheduler) liveNominations(claim string) []*corev1.Pod {
	var out []*corev1.Pod
	seen := map[string]bool{}
	holds := func(p *corev1.Pod) {
		if seen[string(p.UID)] {
			return
		}
		seen[string(p.UID)] = true
		if pending, _, _ := s.cfg.Early.Pending(p, s.now()); !pending {
			return
		}
		if n := s.nomination(p); n.Live && n.Claim == claim {
			out = append(out, p)
		}
	}
	for _, p := range s.cluster.PodsNominatedTo(claim) {
		holds(p)
	}
	for uid, n := range s.recent.nominatedTo(claim) {
		if p, ok := s.cluster.Pod(n.namespace, n.name); ok && string(p.UID) == uid {
			holds(p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// publishAdopted publishes the LaunchIntent of each unlaunched NodeClaim among targets (those
// the plan placed pods on, or the batch's pods are nominated to) that this replica did not
// write: a previous leader's, or one whose Create went through though its answer was lost (the
// API server restarting mid-request), so no batch published it. Pods wait on it now; the
// reconcile loop would take an interval. A repeat is free (dedup on the
// claim's name).
func (s *scheduler) publishAdopted(ctx context.Context, targets map[string]bool, v view, log zerolog.Logger) {
	for _, c := range v.claims {
		if !targets[c.Name] || !s.unlaunchedForeign(c) {
			continue
		}
		cr := created{state: c}
		for _, p := range s.liveNominations(c.Name) {
			cr.pods = append(cr.pods, &commonv1.PodRef{Namespace: p.Namespace, Name: p.Name, Uid: string(p.UID)})
		}
		if err := s.publishIntent(ctx, cr, v, "adopted"); err != nil {
			log.Warn().Err(err).Str("nodeclaim", c.Name).Msg("publishing the launch intent of a claim this replica did not write; the reconcile loop will")
		}
	}
}

// unlaunchedForeign reports whether the claim waits for its launch intent and was not written by
// this replica (whose batches publish the intents of their own claims).
func (s *scheduler) unlaunchedForeign(c claimState) bool {
	return !c.Launched && c.ProviderID == "" && !c.Deleting && !s.recent.created(c.Name)
}

// targetsOf names the nodes and claims the placements put pods on.
func targetsOf(placements []scheduling.Placement) map[string]bool {
	targets := map[string]bool{}
	for _, p := range placements {
		targets[p.Node] = true
	}
	return targets
}

// nominateExisting tells pods the core placed on existing capacity where they go. A pod placed
// on a NodeClaim, in flight or registered, is nominated to it, so its room is held for it until
// kube-scheduler binds it or the nomination ends; one placed on a node Fleetwright does not
// manage is only told. It stops when this replica no longer leads (errFenced).
func (s *scheduler) nominateExisting(ctx context.Context, placements []scheduling.Placement, v view, kube map[string]*corev1.Pod, log zerolog.Logger) error {
	claimOf := map[string]string{} // core target (claim name, or node name once registered) → claim
	for _, c := range v.claims {
		claimOf[c.Name] = c.Name
		if c.NodeName != "" {
			claimOf[c.NodeName] = c.Name
		}
	}
	byClaim := map[string][]*corev1.Pod{}
	var order []string
	for _, p := range placements {
		pod := kube[p.PodUID]
		if pod == nil {
			continue
		}
		claim, ok := claimOf[p.Node]
		if !ok {
			nominated(s.recorder, pod, "node", p.Node)
			continue
		}
		if byClaim[claim] == nil {
			order = append(order, claim)
		}
		byClaim[claim] = append(byClaim[claim], pod)
	}
	for _, claim := range order {
		if err := s.nominateTo(ctx, claim, byClaim[claim]); errors.Is(err, errFenced) {
			return err
		} else if err != nil {
			log.Warn().Err(err).Msg("nominating pods to an existing nodeclaim; they are offered again")
		}
	}
	return nil
}

// reportUnschedulable records a FailedScheduling event on each pod no pool can take.
func (s *scheduler) reportUnschedulable(unplaced []scheduling.Unschedulable, v view, kube map[string]*corev1.Pod, log zerolog.Logger) {
	for i, u := range unplaced {
		pod := kube[u.PodUID]
		if pod == nil {
			continue
		}
		reason := v.unschedulableReason(u.Reason)
		failedScheduling(s.recorder, pod, reason)
		if i < 10 {
			log.Warn().Str("pod", pod.Namespace+"/"+pod.Name).Str("reason", reason).Msg("could not schedule pod")
		}
	}
	if len(unplaced) > 10 {
		log.Warn().Int("more", len(unplaced)-10).Msg("could not schedule further pods")
	}
}

// unschedulableReason is the core's reason a pod cannot be placed, completed with the pools
// left out of the solve (not ready) or the absence of any pool.
func (v view) unschedulableReason(core string) string {
	switch {
	case len(v.pools) == 0 && len(v.notReady) > 0:
		return strings.Join(v.notReady, "; ")
	case len(v.pools) == 0:
		return noNodePool
	case len(v.notReady) > 0:
		return core + "; " + strings.Join(v.notReady, "; ")
	}
	return core
}

// launchMessage is Karpenter's line for a NodeClaim about to launch:
// launching nodeclaim with 5 pods requesting {"cpu":"5125m","pods":"7"} from types a, b, ... and 38 other(s).
func launchMessage(pods int, requests scheduling.ResourceList, types []string) string {
	req := map[string]string{}
	for n, q := range podproj.KubeResources(requests) {
		req[string(n)] = q.String()
	}
	b, _ := json.Marshal(req) // keys sorted
	return fmt.Sprintf("launching nodeclaim with %d pods requesting %s from types %s", pods, b, typeList(types))
}

func typeList(types []string) string {
	const shown = 5
	if len(types) <= shown {
		return strings.Join(types, ", ")
	}
	return fmt.Sprintf("%s ... and %d other(s)", strings.Join(types[:shown], ", "), len(types)-shown)
}

func targets(ps []scheduling.Placement) int {
	seen := map[string]bool{}
	for _, p := range ps {
		seen[p.Node] = true
	}
	return len(seen)
}

func poolsOf(p scheduling.Plan) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range p.NodeClaims {
		if !seen[c.NodePool] {
			seen[c.NodePool] = true
			out = append(out, c.NodePool)
		}
	}
	return out
}

// chosenTypes lists each claim's cheapest option.
func chosenTypes(p scheduling.Plan) []string {
	var out []string
	for _, c := range p.NodeClaims {
		if len(c.InstanceTypes) > 0 {
			out = append(out, c.InstanceTypes[0])
		}
	}
	return out
}
