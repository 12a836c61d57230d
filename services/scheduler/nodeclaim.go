package main

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// batchAnnotation records on each NodeClaim the batch it was planned for (for tracing a
// decision back to its pods).
const batchAnnotation = "fleetwright.io/batch-id"

// claimState is a NodeClaim as the scheduler reads it.
type claimState struct {
	claimView
	ProviderID, NodeName string
	// Launched: the claim has a Launched condition (True, or False after a failed launch).
	Launched, Initialized bool
	Deleting              bool
	Created               time.Time
	Allocatable, Capacity corev1.ResourceList
}

func claimStateOf(nc *karpv1.NodeClaim) claimState {
	pool := clusterstate.PoolOf(nc.Labels)
	c := claimState{
		claimView: claimView{Name: nc.Name, UID: string(nc.UID), NodePool: pool, BatchID: nc.Annotations[batchAnnotation], NodeClassRef: nodeClassRef(nc.Spec.NodeClassRef),
			Labels: nc.Labels, Taints: nc.Spec.Taints, StartupTaints: nc.Spec.StartupTaints, Requests: nc.Spec.Resources.Requests},
		ProviderID: nc.Status.ProviderID, NodeName: nc.Status.NodeName,
		Launched: nc.Condition(karpv1.ConditionTypeLaunched) != nil, Initialized: nc.IsTrue(karpv1.ConditionTypeInitialized),
		Deleting: nc.DeletionTimestamp != nil, Created: nc.CreationTimestamp.Time, Allocatable: nc.Status.Allocatable, Capacity: nc.Status.Capacity,
	}
	for _, r := range nc.Spec.Requirements {
		m := &commonv1.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values}
		if r.MinValues != nil {
			m.MinValues = ptr.To(int32(*r.MinValues))
		}
		c.Requirements = append(c.Requirements, m)
	}
	return c
}

// nodeClaimObject is the NodeClaim for a planned claim: with the termination finalizer, owned by its NodePool (a v1alpha5
// Provisioner's claims carry its name as a label instead), with the claim's requirements
// (instance types cheapest first, zones, capacity types), resources, labels and the pool's
// taints, node class and lifetimes.
func nodeClaimObject(c scheduling.NodeClaim, p poolView, batchID string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		// Created with the termination finalizer: however the claim is deleted, the terminator
		// drains its node and terminates its instance before it goes.
		ObjectMeta: metav1.ObjectMeta{Name: claimName(batchID, c), Labels: map[string]string{},
			Annotations: map[string]string{batchAnnotation: batchID}, Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			Taints: p.spec.Taints, StartupTaints: p.spec.StartupTaints,
			Resources:    karpv1.ResourceRequirements{Requests: podproj.KubeResources(c.Requests)},
			NodeClassRef: p.spec.NodeClassRef, ExpireAfter: p.spec.ExpireAfter, TerminationGracePeriod: p.spec.TerminationGracePeriod,
		},
	}
	for k, v := range p.annotations {
		nc.Annotations[k] = v
	}
	// What the claim is made from, for drift detection (disruption.Drifted): the pool's hash
	// and its node class's (which the launcher records again from the class it launches with).
	nc.Annotations[karpv1.NodePoolHashAnnotationKey] = p.hash
	nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] = karpv1.NodePoolHashVersion
	if p.classHash != "" {
		nc.Annotations[ec2v1.AnnotationEC2NodeClassHash] = p.classHash
		nc.Annotations[ec2v1.AnnotationEC2NodeClassHashVersion] = ec2v1.EC2NodeClassHashVersion
	}
	for k, v := range c.Labels {
		nc.Labels[k] = v
	}
	if p.legacy {
		// v1alpha5 nodes carry the provisioner's name, not a nodepool label.
		nc.Labels[scheduling.LabelProvisionerName] = p.core.Name
		delete(nc.Labels, scheduling.LabelNodePool)
	} else {
		nc.OwnerReferences = []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool",
			Name: p.core.Name, UID: p.uid, BlockOwnerDeletion: ptr.To(true)}}
	}
	for _, r := range claimRequirements(c) {
		req := karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values}
		if r.MinValues > 0 {
			req.MinValues = ptr.To(r.MinValues)
		}
		nc.Spec.Requirements = append(nc.Spec.Requirements, req)
	}
	return nc
}

// claimRequirements are the claim's requirements with the zone, capacity-type and
// instance-type keys given once, by the final In lists the core chose. The pool's own keys
// (karpenter.sh/nodepool, karpenter.sh/provisioner-name) are labels, not requirements: the API
// restricts the karpenter.sh domain in requirements.
func claimRequirements(c scheduling.NodeClaim) []scheduling.Requirement {
	final := map[string]bool{scheduling.LabelZone: true, scheduling.LabelCapacityType: true, scheduling.LabelInstanceType: true}
	var out []scheduling.Requirement
	for _, r := range c.Requirements {
		if !final[r.Key] && !strings.HasSuffix(strings.SplitN(r.Key, "/", 2)[0], "karpenter.sh") {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return append(out,
		scheduling.Requirement{Key: scheduling.LabelInstanceType, Operator: scheduling.OpIn, Values: c.InstanceTypes},
		scheduling.Requirement{Key: scheduling.LabelZone, Operator: scheduling.OpIn, Values: c.Zones},
		scheduling.Requirement{Key: scheduling.LabelCapacityType, Operator: scheduling.OpIn, Values: c.CapacityTypes})
}

// created is a NodeClaim written for a planned claim, with the pods nominated to it.
type created struct {
	state claimState
	pods  []*commonv1.PodRef
}

// claimNameHashLen is how many base32 characters of the hash name a claim: 50 bits, so two
// claims of different batches or plans share a name with odds of about n²/2⁵¹ among n claims.
const claimNameHashLen = 10

// claimPrefixMax keeps <pool>-<hash> within a DNS label (63), as the API server truncates a
// generateName prefix.
const claimPrefixMax = 63 - 1 - claimNameHashLen

// claimName names a planned claim after its batch and the part of the plan it is: its pool and
// the pods it was planned for (the claim's index stands in for a claim planned without pods).
// A batch delivered again, or handled again by another replica, that plans the same claim
// names it the same, so creating it twice finds the first one (AlreadyExists) instead of making
// a second; a different plan names its claims differently.
func claimName(batchID string, c scheduling.NodeClaim) string {
	uids := append([]string(nil), c.PodUIDs...)
	sort.Strings(uids)
	h := sha256.New()
	for _, part := range append([]string{batchID, c.NodePool}, uids...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	if len(uids) == 0 {
		h.Write([]byte(c.Name)) // the placeholder, planned-<n>
	}
	sum := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h.Sum(nil)))
	prefix := c.NodePool
	if len(prefix) > claimPrefixMax {
		prefix = prefix[:claimPrefixMax]
	}
	return prefix + "-" + sum[:claimNameHashLen]
}

// claimWorkers bounds the NodeClaim creates in flight for one batch (the client's QPS limit
// applies on top): a scale-out of thousands of pods plans hundreds of claims.
const claimWorkers = 16

// createClaims writes a NodeClaim per planned claim, a few at a time, each with the nominations
// of its pods recorded in it (podproj.NominationKeyPrefix), so nominating costs no write of its
// own. A claim this batch planned already (an earlier delivery, or another replica handling it
// at the same time, created it) is taken as created: it records its pods' nominations already,
// its intent is published again (JetStream drops the repeat), and no second claim is made. On
// error it returns the claims written too, in plan order.
func (s *scheduler) createClaims(ctx context.Context, plan scheduling.Plan, v view, kube map[string]*corev1.Pod,
	batchID string, log zerolog.Logger) ([]created, error) {
	written := make([]*created, len(plan.NodeClaims))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(claimWorkers)
	for i, c := range plan.NodeClaims {
		g.Go(func() error {
			cr, err := s.createPlanned(gctx, c, v, kube, batchID, log)
			written[i] = cr
			return err
		})
	}
	err := g.Wait()
	var out []created
	for _, cr := range written {
		if cr != nil {
			out = append(out, *cr)
		}
	}
	return out, err
}

// createPlanned writes one planned claim with its pods' nominations; nil without error when the
// claim an earlier delivery made for it is being deleted (its pods wait for a later batch).
func (s *scheduler) createPlanned(ctx context.Context, c scheduling.NodeClaim, v view, kube map[string]*corev1.Pod,
	batchID string, log zerolog.Logger) (*created, error) {
	p, ok := v.pool(c.NodePool)
	if !ok {
		return nil, fmt.Errorf("creating nodeclaim: nodepool %q is gone", c.NodePool)
	}
	// The time as the record holds it (whole seconds), so this replica's memory of the
	// nomination and pod-watcher's reading of the record end it at the same instant.
	at := s.now().UTC().Truncate(time.Second)
	var pods []*corev1.Pod
	var noms []podproj.PodNomination
	for _, uid := range c.PodUIDs {
		if pod := kube[uid]; pod != nil {
			pods = append(pods, pod)
			noms = append(noms, podproj.PodNomination{UID: uid, Pod: pod.Namespace + "/" + pod.Name, At: at})
		}
	}
	// The claim records as many of its pods' nominations as its budget takes (the plan is
	// deterministic, so a delivery again keeps the same ones); the others are not nominated, and
	// a later batch plans them onto a claim with room (the node may still take them: it is
	// sized for them all).
	noms, over := podproj.WithinBudget(0, noms)
	pods = pods[:len(noms)]
	if len(over) > 0 {
		log.Info().Str("nodepool", c.NodePool).Int("pods", len(noms)+len(over)).Int("left", len(over)).
			Msgf("a nodeclaim records the nominations of at most %d KiB of pods: %d pod(s) left for a later batch", podproj.NominationBudget>>10, len(over))
	}
	nc, err := s.createClaim(ctx, c, p, batchID, func(nc *karpv1.NodeClaim) {
		for _, n := range noms {
			nc.Annotations[podproj.NominationKey(n.UID)] = n.Value()
		}
		launchRecord(nc, pods, c.Overhead, v.histories)
	})
	adopted := false
	if apierrors.IsAlreadyExists(err) {
		nc, err = s.plannedBefore(ctx, claimName(batchID, c), batchID)
		adopted = true
	}
	if errors.Is(err, errClaimGoing) {
		log.Info().Err(err).Msg("leaving the claim's pods to a later batch")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	faultpoint.Reach(faultpoint.SchedulerClaimCreated)
	s.recent.addClaim(nc.Name)
	cr := &created{state: claimStateOf(nc)}
	for _, pod := range pods {
		cr.pods = append(cr.pods, &commonv1.PodRef{Namespace: pod.Namespace, Name: pod.Name, Uid: string(pod.UID)})
	}
	if adopted {
		log.Info().Str("nodeclaim", nc.Name).Str("nodepool", c.NodePool).
			Msg("nodeclaim planned for this batch exists already (an earlier delivery made it, with its pods' nominations)")
		for i := range noms {
			if n, ok := podproj.NominationOn(nc, noms[i].UID); ok {
				noms[i] = n
			}
		}
		s.remember(nc.Name, string(nc.UID), noms, nil)
	} else {
		s.metrics.claimCreated(createdForProvisioning, createdProvisioned, c.NodePool)
		log.Info().Str("nodeclaim", nc.Name).Str("nodepool", c.NodePool).Str("requests", scheduling.FormatResources(c.Requests)).
			Int("instance-types", len(c.InstanceTypes)).Strs("zones", c.Zones).Strs("capacity-types", c.CapacityTypes).
			Float64("price", c.PriceUSDPerHour).Int("pods", len(pods)).Msg("created nodeclaim")
		log.Info().Str("nodeclaim", nc.Name).Msg(launchMessage(len(c.PodUIDs), c.Requests, c.InstanceTypes))
		s.remember(nc.Name, string(nc.UID), noms, pods)
	}
	faultpoint.Reach(faultpoint.SchedulerMidNomination)
	return cr, nil
}

// errClaimGoing: the claim a batch planned exists from an earlier handling but is being deleted.
var errClaimGoing = errors.New("nodeclaim is being deleted")

// plannedBefore reads the NodeClaim of the name a plan of this batch gave, found to exist
// already. It is this batch's claim if it says so (the name comes from the batch and the claim's
// pods, so anything else is a hash collision, refused).
func (s *scheduler) plannedBefore(ctx context.Context, name, batchID string) (*karpv1.NodeClaim, error) {
	u, err := s.claims.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading nodeclaim %s, which exists already: %w", name, err)
	}
	var nc karpv1.NodeClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err != nil {
		return nil, fmt.Errorf("decoding nodeclaim %s: %w", name, err)
	}
	switch {
	case nc.Annotations[batchAnnotation] != batchID:
		return nil, fmt.Errorf("nodeclaim %s exists already for batch %q, not this batch %q", name, nc.Annotations[batchAnnotation], batchID)
	case nc.DeletionTimestamp != nil:
		return nil, fmt.Errorf("nodeclaim %s, planned for this batch on an earlier delivery: %w", name, errClaimGoing)
	}
	return &nc, nil
}

// mutate, if given, adjusts the object before it is written (a replacement's fixed name).
func (s *scheduler) createClaim(ctx context.Context, c scheduling.NodeClaim, p poolView, batchID string, mutate ...func(*karpv1.NodeClaim)) (*karpv1.NodeClaim, error) {
	ctx, span := tracer.Start(ctx, "scheduler.nodeclaim")
	defer span.End()
	span.SetAttributes(attribute.String("fleetwright.nodepool", c.NodePool), attribute.Int("fleetwright.pods", len(c.PodUIDs)),
		attribute.StringSlice("fleetwright.instance_types", c.InstanceTypes), attribute.Float64("fleetwright.price_usd_per_hour", c.PriceUSDPerHour))
	object := nodeClaimObject(c, p, batchID)
	if tp := telemetry.TraceParent(ctx); tp != "" {
		// The claim's later life (its node registering, the terminator's care) joins this trace.
		object.Annotations[telemetry.TraceAnnotation] = tp
	}
	for _, m := range mutate {
		m(object)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(object)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("encoding nodeclaim: %w", err)
	}
	wctx, done, err := s.fence(ctx, "nodeclaim")
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	defer done()
	if err := unstructured.SetNestedField(obj, s.lease.stamp(wctx), "metadata", "annotations", termAnnotation); err != nil {
		return nil, fmt.Errorf("stamping nodeclaim: %w", err)
	}
	var u *unstructured.Unstructured
	err = s.retryTerm(wctx, func() (err error) {
		u, err = s.claims.Create(wctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		return err
	})
	if err = s.cut(wctx, "nodeclaim", err); errors.Is(err, errFenced) {
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("creating nodeclaim for nodepool %s: %w", c.NodePool, err)
	}
	var nc karpv1.NodeClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err != nil {
		return nil, fmt.Errorf("decoding created nodeclaim: %w", err)
	}
	span.SetAttributes(attribute.String("fleetwright.nodeclaim", nc.Name))
	return &nc, nil
}

// nominateTo records on an existing claim that the pods wait for it: one merge patch of a key
// per pod, which leaves the claim's other nominations alone.
func (s *scheduler) nominateTo(ctx context.Context, claim string, pods []*corev1.Pod) error {
	at := s.now().UTC().Truncate(time.Second) // see createPlanned
	noms := make([]podproj.PodNomination, 0, len(pods))
	for _, pod := range pods {
		noms = append(noms, podproj.PodNomination{UID: string(pod.UID), Pod: pod.Namespace + "/" + pod.Name, At: at})
	}
	noms, over := podproj.WithinBudget(s.recordsSize(claim), noms)
	pods = pods[:len(noms)]
	if len(over) > 0 {
		s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", claim).Int("left", len(over)).
			Msgf("nodeclaim records the nominations of at most %d KiB of pods: %d pod(s) left for a later batch", podproj.NominationBudget>>10, len(over))
	}
	if len(noms) == 0 {
		return nil
	}
	wctx, done, err := s.fence(ctx, "nomination")
	if err != nil {
		return err
	}
	defer done()
	patch, err := stampPatch(podproj.NominationPatch(noms), s.lease.stamp(wctx))
	if err != nil {
		return err
	}
	var patched *unstructured.Unstructured
	err = s.retryTerm(wctx, func() (err error) {
		patched, err = s.claims.Patch(wctx, claim, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err = s.cut(wctx, "nomination", err); errors.Is(err, errFenced) {
		return err
	}
	if err != nil {
		return fmt.Errorf("nominating %d pod(s) to nodeclaim %s: %w", len(pods), claim, err)
	}
	faultpoint.Reach(faultpoint.SchedulerMidNomination)
	s.remember(claim, string(patched.GetUID()), noms, pods)
	return nil
}

// recordsSize is the bytes the claim's nomination records take: those its cached object holds,
// and those this replica wrote since that the cache does not show yet.
func (s *scheduler) recordsSize(claim string) int {
	var annotations map[string]string
	if nc, ok := s.cluster.Claim(claim); ok {
		annotations = nc.Annotations
	}
	size := podproj.RecordsSize(annotations)
	for uid, n := range s.recent.nominatedTo(claim) {
		if _, cached := annotations[podproj.NominationKey(uid)]; !cached {
			size += podproj.PodNomination{UID: uid, Pod: n.namespace + "/" + n.name, At: n.at}.RecordSize()
		}
	}
	return size
}

// remember keeps the nominations recorded on the claim in this replica's memory, until its cache
// shows them, and tells each pod (given) where it goes in an event, within the events' budget.
func (s *scheduler) remember(claim, claimUID string, noms []podproj.PodNomination, pods []*corev1.Pod) {
	for _, n := range noms {
		ns, name, _ := strings.Cut(n.Pod, "/")
		s.recent.addNomination(n.UID, nomination{namespace: ns, name: name, claim: claim, at: n.At})
	}
	s.nominatedEvents.tell(claim, claimUID, pods)
}

// publishIntent publishes the claim's LaunchIntent with Nats-Msg-Id = NodeClaim name.
func (s *scheduler) publishIntent(ctx context.Context, c created, v view, source string) error {
	p, _ := v.pool(c.state.NodePool)
	intent := launchIntent(intentSource{claim: c.state.claimView, pods: c.pods, types: v.byName, typeList: v.types,
		zoneIDs: v.zoneIDs, maxTypes: s.cfg.MaxInstanceTypes,
		unavailable: s.unavailable.Current(), kubelet: p.kubelet, now: s.now()})
	if len(intent.GetInstanceTypes()) == 0 {
		return fmt.Errorf("publishing launch intent for %s: no instance type has an available offering", c.state.Name)
	}
	wctx, done, err := s.fence(ctx, "launch_intent")
	if err != nil {
		return err
	}
	defer done()
	if err := s.cut(wctx, "launch_intent", s.rt.Bus.Publish(wctx, s.rt.Bus.Prefix().Of(subject.LaunchIntents), intent, c.state.Name)); errors.Is(err, errFenced) {
		return err
	} else if err != nil {
		return fmt.Errorf("publishing launch intent for %s: %w", c.state.Name, err)
	}
	s.metrics.intents.WithLabelValues(source).Inc()
	return nil
}

// reconcile republishes the LaunchIntent of each NodeClaim that is not launched yet. A claim
// younger than the reconcile interval is left to the batch that created it, which may still be
// nominating its pods: an intent published now would carry only some of them, and JetStream's
// dedup on the claim name would then drop the batch's complete one.
func (s *scheduler) reconcile(ctx context.Context) error {
	settled := s.now().Add(-s.cfg.Reconcile)
	return s.republish(ctx, "reconcile", func(c claimState) bool { return !c.Created.After(settled) })
}

// publishInherited publishes, at takeover, the LaunchIntent of each unlaunched NodeClaim this
// replica did not create, however young: a previous leader made it and died (or lost the lease)
// before publishing its intent, and no batch of this replica is nominating its pods, so
// waiting a reconcile interval for it would only keep its pods waiting. The takeover's own
// batch has run first, so the intent names the pods it nominated to the claim too.
func (s *scheduler) publishInherited(ctx context.Context) error {
	return s.republish(ctx, "takeover", func(c claimState) bool { return !s.recent.created(c.Name) })
}

// republish publishes the LaunchIntent of each NodeClaim not launched (nor being deleted) that
// pick selects, with the pods nominated to it.
func (s *scheduler) republish(ctx context.Context, source string, pick func(claimState) bool) error {
	v, err := s.read()
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range v.claims {
		if c.Launched || c.ProviderID != "" || c.Deleting || !pick(c) {
			continue
		}
		cr := created{state: c}
		for _, p := range s.liveNominations(c.Name) {
			cr.pods = append(cr.pods, &commonv1.PodRef{Namespace: p.Namespace, Name: p.Name, Uid: string(p.UID)})
		}
		if err := s.publishIntent(ctx, cr, v, source); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
