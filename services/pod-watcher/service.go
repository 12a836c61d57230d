package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/subject"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// watcher owns the informers and the batching window.
type watcher struct {
	cfg     config
	rt      *service.Runtime
	metrics *metrics

	cluster *clusterstate.Cache

	mu      sync.Mutex
	batcher *batcher
	// ends holds, per NodeClaim, when the earliest live nomination of a pending pod to it ends:
	// the pods nominated to that claim are looked at again then, and those still pending are
	// offered again.
	ends map[string]time.Time
	// seen remembers each pending pod's last nomination it saw, by pod UID, so a pod whose claim
	// was deleted (and its record with it) is still offered as released from that nomination:
	// part of the batch id, so the offer is not taken for a repeat of the one that planned it.
	seen map[string]podproj.Nomination
	// untried holds the pods kube-scheduler has not tried yet, by UID, with when the early rule
	// (--provision-untried-after) makes them pending: looked at again then.
	untried map[string]untriedPod
	wake    chan struct{}
	now     func() time.Time
}

// serve builds the watcher on rt (informers, batching window) and runs it until ctx ends.
func serve(ctx context.Context, cfg config, rt *service.Runtime) error {
	w := &watcher{cfg: cfg, rt: rt, metrics: newMetrics(rt.Registry), batcher: newBatcher(cfg.BatchIdle, cfg.BatchMax, cfg.Resync),
		ends: map[string]time.Time{}, seen: map[string]podproj.Nomination{}, untried: map[string]untriedPod{}, wake: make(chan struct{}, 1), now: time.Now}
	dyn, err := dynamic.NewForConfig(rt.RESTConfig)
	if err != nil {
		return fmt.Errorf("creating dynamic client: %w", err)
	}
	// Only unbound pods can be pending: the field selector keeps the cache small.
	if w.cluster, err = clusterstate.New(rt.Kube, dyn, clusterstate.Want{Pods: clusterstate.UnboundPods, Volumes: true, NodeClaims: true},
		rt.Log); err != nil {
		return err
	}
	if _, err := w.cluster.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.observe(o) },
		UpdateFunc: func(_, o any) { w.observe(o) },
		DeleteFunc: func(o any) { w.forget(o) },
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	// A NodeClaim that appears, goes away, starts being deleted, gets a ready node, or records
	// nominations (new or ended) changes the fate of the pods nominated to it: look at them again.
	if _, err := w.cluster.NodeClaims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if nc, ok := o.(*karpv1.NodeClaim); ok {
				w.observeNominatedTo(nc.Name)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*karpv1.NodeClaim)
			c, ok := cur.(*karpv1.NodeClaim)
			if ok && (o == nil || podproj.ClaimOf(o) != podproj.ClaimOf(c) || nominationsChanged(o, c)) {
				w.observeNominatedTo(c.Name)
			}
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			// Gone from the cache already: its nominees are read off the deleted object.
			if nc, ok := o.(*karpv1.NodeClaim); ok {
				for _, p := range w.cluster.NomineesOf(nc) {
					w.observe(p)
				}
			}
		},
	}); err != nil {
		return fmt.Errorf("watching nodeclaims: %w", err)
	}
	rt.Admin.AddReadiness("informers", w.cluster.Ready)
	return w.run(ctx)
}

func (w *watcher) run(ctx context.Context) error {
	if err := w.cluster.Start(ctx); err != nil {
		return err
	}
	w.rt.Log.Info().Dur("batchIdle", w.cfg.BatchIdle).Dur("batchMax", w.cfg.BatchMax).Msg("watching for pending pods")
	resync := time.NewTicker(w.cfg.Resync)
	defer resync.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		due, recheck := w.batcher.due(), w.nextEnd()
		w.mu.Unlock()
		wait := time.Hour
		if !due.IsZero() {
			wait = max(due.Sub(w.now()), 0)
		}
		if !recheck.IsZero() {
			wait = min(wait, max(recheck.Sub(w.now()), 0))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		case <-resync.C:
			w.resync()
		case <-timer.C:
			w.recheckEnded()
			w.flush(ctx)
		}
	}
}

// observe adds a pending pod without a live nomination to the window, or removes one that
// stopped being pending. A live nomination that will end is remembered, so the pod is looked at
// again when it does. It runs from the pod informer, the NodeClaim informer and the run loop,
// each holding an object read a moment earlier: under the lock, the pod is judged as the store
// holds it now, so a stale copy never undoes what a newer one decided.
func (w *watcher) observe(obj any) {
	seen, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	defer w.metrics.reconciles.Observe(karpmetrics.ControllerPodTrigger, time.Now(), nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	pod := seen
	if cur, exists, err := w.cluster.Pods.GetStore().Get(seen); err == nil && exists {
		pod = cur.(*corev1.Pod)
	} else if err == nil {
		w.batcher.remove(string(seen.UID)) // gone (deleted or bound) since it was read
		return
	}
	if pod.UID != seen.UID {
		w.batcher.remove(string(seen.UID)) // replaced by a pod of the same name
	}
	pending, _, due := w.cfg.Early.Pending(pod, w.now())
	if due.IsZero() {
		delete(w.untried, string(pod.UID))
	} else if _, ok := w.untried[string(pod.UID)]; !ok {
		w.untried[string(pod.UID)] = untriedPod{key: pod, due: due}
		w.poke()
	}
	var nom podproj.Nomination
	if pending {
		nom = w.cfg.Nomination.JudgeNomination(w.cluster.NominationOf(string(pod.UID)), w.cluster.NominationClaim, w.now())
		pending = !nom.Live
	}
	if nom.Live && !nom.Expires.IsZero() {
		if cur, ok := w.ends[nom.Claim]; !ok || nom.Expires.Before(cur) {
			w.ends[nom.Claim] = nom.Expires
			w.poke()
		}
	}
	if !pending {
		w.batcher.remove(string(pod.UID))
		if nom.Live {
			w.seen[string(pod.UID)] = nom
		} else {
			delete(w.seen, string(pod.UID))
		}
		return
	}
	if nom.Claim == "" {
		nom = w.seen[string(pod.UID)] // its claim is gone, and the record with it
	}
	if nom.Expired != "" && !w.batcher.has(string(pod.UID)) {
		w.metrics.nominationsExpired.Inc()
		w.rt.Log.Debug().Str("pod", pod.Namespace+"/"+pod.Name).Str("why", nom.Expired).Msg("offering pod again: its nomination ended")
	}
	opened := w.batcher.size() == 0
	proj := podproj.Project(pod, w.cluster.Volumes)
	if nom.Claim != "" { // the nomination that ended: part of the batch id
		proj.NominatedNodeClaimName = nom.Claim
		if !nom.At.IsZero() {
			proj.NominatedAt = timestamppb.New(nom.At)
		}
	}
	w.batcher.add(proj, w.now())
	if opened {
		w.poke()
	}
}

func (w *watcher) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		w.mu.Lock()
		w.batcher.remove(string(pod.UID))
		delete(w.seen, string(pod.UID))
		delete(w.untried, string(pod.UID))
		w.mu.Unlock()
	}
}

// nominationsChanged reports whether the claim's record of nominations differs between the two.
func nominationsChanged(old, cur *karpv1.NodeClaim) bool {
	recorded := func(nc *karpv1.NodeClaim) map[string]string {
		out := map[string]string{}
		for k, v := range nc.Annotations {
			if strings.HasPrefix(k, podproj.NominationKeyPrefix) {
				out[k] = v
			}
		}
		return out
	}
	return !maps.Equal(recorded(old), recorded(cur))
}

// resync offers every pod still pending again (e.g. after the scheduler could not place it),
// and finds anew when each live nomination ends.
func (w *watcher) resync() {
	w.mu.Lock()
	clear(w.ends)
	w.mu.Unlock()
	for _, obj := range w.cluster.Pods.GetStore().List() {
		w.observe(obj)
	}
}

// observeNominatedTo looks again at the pods nominated to a claim.
func (w *watcher) observeNominatedTo(claim string) {
	for _, p := range w.cluster.PodsNominatedTo(claim) {
		w.observe(p)
	}
}

// nextEnd is when the earliest live nomination ends; zero if none will. The caller holds mu.
func (w *watcher) nextEnd() time.Time {
	var next time.Time
	for _, t := range w.ends {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, u := range w.untried {
		if next.IsZero() || u.due.Before(next) {
			next = u.due
		}
	}
	return next
}

// untriedPod is a pod kube-scheduler has not tried, and when the early rule makes it pending.
type untriedPod struct {
	key *corev1.Pod // as last observed: observe reads the store's current copy by its key
	due time.Time
}

// recheckEnded looks again at the pods of each claim whose earliest nomination has ended.
func (w *watcher) recheckEnded() {
	now := w.now()
	var due []string
	w.mu.Lock()
	for claim, t := range w.ends {
		if !now.Before(t) {
			due = append(due, claim)
			delete(w.ends, claim)
		}
	}
	var early []*corev1.Pod
	for uid, u := range w.untried {
		if !now.Before(u.due) {
			early = append(early, u.key)
			delete(w.untried, uid)
		}
	}
	w.mu.Unlock()
	for _, claim := range due {
		w.observeNominatedTo(claim)
	}
	for _, p := range early {
		w.observe(p)
	}
}

func (w *watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// payloadHeadroom is what a batch leaves of the server's max_payload for the message's headers
// (Nats-Msg-Id, Fw-Type, trace context).
const payloadHeadroom = 1024

// flush publishes the window if it is due, as one batch or, when it does not fit in one NATS
// message (the server's max_payload), several. A batch that cannot be published goes back into
// the window, so no pod is lost while NATS is away.
func (w *watcher) flush(ctx context.Context) {
	limit := int(w.rt.Bus.NATS().MaxPayload()) - payloadHeadroom
	w.mu.Lock()
	batches, tooBig, ok := w.batcher.flush(w.now(), w.cfg.WatcherID, limit)
	w.mu.Unlock()
	if !ok {
		return
	}
	for _, p := range tooBig {
		w.metrics.podsTooLarge.Inc()
		w.rt.Log.Error().Str("pod", p.GetNamespace()+"/"+p.GetName()).Int("bytes", proto.Size(p)).Int("limit", limit).
			Msg("pending pod not offered: its projection alone exceeds the NATS server's max_payload; raise max_payload")
	}
	pending := 0
	for _, batch := range batches {
		if w.publish(ctx, batch, len(batches)) {
			pending += len(batch.Pods)
		}
	}
	w.metrics.pendingPods.Set(float64(pending))
}

// publish publishes one batch, putting its pods back in the window if it cannot.
func (w *watcher) publish(ctx context.Context, batch *podsv1.PendingPodBatch, parts int) bool {
	ctx, span := otel.Tracer("pod-watcher").Start(ctx, "pod-watcher.batch")
	defer span.End()
	span.SetAttributes(attribute.String("fleetwright.batch_id", batch.BatchId), attribute.Int("fleetwright.pods", len(batch.Pods)))
	log := w.rt.Log.With().Ctx(ctx).Str("batch", batch.BatchId).Int("pods", len(batch.Pods)).Logger()
	if parts > 1 {
		log = log.With().Int("parts", parts).Logger()
	}
	subj := w.rt.Bus.Prefix().Of(subject.PodsPending)
	if err := w.rt.Bus.Publish(ctx, subj, batch, batch.BatchId); err != nil {
		span.RecordError(err)
		w.metrics.batches.WithLabelValues("error").Inc()
		log.Error().Err(err).Msg("publishing pending pods failed; they stay in the next window")
		w.requeue(batch)
		return false
	}
	w.metrics.batches.WithLabelValues("published").Inc()
	w.metrics.batchSize.Observe(float64(len(batch.Pods)))
	log.Info().Dur("window", batch.WindowCloseTime.AsTime().Sub(batch.WindowOpenTime.AsTime())).Msgf("found %d provisionable pod(s)", len(batch.Pods))
	return true
}

func (w *watcher) requeue(batch *podsv1.PendingPodBatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range batch.Pods {
		w.batcher.add(p, w.now())
	}
}

type metrics struct {
	batches            *prometheus.CounterVec
	batchSize          prometheus.Histogram
	pendingPods        prometheus.Gauge
	nominationsExpired prometheus.Counter
	podsTooLarge       prometheus.Counter
	// reconciles counts each pod event observed as controller-runtime counts Karpenter's
	// provisioner.trigger.pod, the controller that does this job there.
	reconciles *karpmetrics.Reconciles
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := service.Metrics{Reg: reg}
	reconciles := karpmetrics.Families{Reg: reg}.Reconciles()
	reconciles.Init(karpmetrics.ControllerPodTrigger)
	return &metrics{
		reconciles:  reconciles,
		batches:     f.CounterVec("fleetwright_pod_watcher_batches_total", "Pending-pod batches by outcome (published, error).", "outcome"),
		batchSize:   f.Histogram("fleetwright_pod_watcher_batch_size", "Pods per published batch.", prometheus.ExponentialBuckets(1, 4, 8)),
		pendingPods: f.Gauge("fleetwright_pending_pods", "Pods in the last published window (all its batches): pending and not yet nominated to a NodeClaim."),
		nominationsExpired: f.Counter("fleetwright_pod_watcher_nominations_expired_total",
			"Times a pending pod was offered again because its nomination ended (claim gone, or its node ready without room for it)."),
		podsTooLarge: f.Counter("fleetwright_pod_watcher_pods_too_large_total", "Pending pods not offered because their projection alone exceeds the NATS server's max_payload."),
	}
}
