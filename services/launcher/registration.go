package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/subject"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	nodesv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/nodes/v1"
)

// nodeState is what registration needs to know of a Node.
type nodeState struct {
	Name       string
	ProviderID string
	Ready      bool
	Labels     map[string]string
	Taints     []*commonv1.Taint
}

// nodeStore reads and patches Nodes.
type nodeStore interface {
	List(ctx context.Context) ([]nodeState, error)
	// Adopt labels and annotates the node for its claim, adds the taints it lacks (only while it
	// is not yet labelled karpenter.sh/registered), removes the given ones, finalizes it and, with
	// an owner, makes it the owner's (once).
	Adopt(ctx context.Context, name string, owner *metav1.OwnerReference, labels, annotations map[string]string, addTaints []corev1.Taint, removeTaints []string) error
}

// registrar links Nodes to NodeClaims and marks them initialized. A node that never registers is
// the terminator's (--registration-ttl there): the launcher launches, it never terminates.
type registrar struct {
	*launcher
	nodes nodeStore
}

// reconcile makes one pass: link new nodes and mark initialized ones. It runs on every Node and
// NodeClaim change, so it must be idempotent and write nothing when there is nothing to do: the
// updates its own writes cause make one more pass, which finds the work done.
func (r *registrar) reconcile(ctx context.Context) error {
	claims, err := r.claims.List(ctx)
	if err != nil {
		return fmt.Errorf("listing nodeclaims: %w", err)
	}
	nodes, err := r.nodes.List(ctx)
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	byProvider := map[string]nodeState{}
	for _, n := range nodes {
		if n.ProviderID != "" {
			byProvider[n.ProviderID] = n
		}
	}
	for _, c := range claims {
		if c.ProviderID == "" || c.Deleting {
			continue
		}
		log := r.log.With().Str("nodeclaim", c.Name).Str("nodepool", c.NodePool).Logger()
		node, ok := byProvider[c.ProviderID]
		switch {
		case ok && !c.Registered:
			sctx, span := r.claimSpan(ctx, "launcher.register", c, node)
			err := r.register(sctx, c, node, log)
			if err != nil {
				log.Warn().Err(err).Msg("registering node")
			}
			endSpan(span, err)
		case ok && c.Registered && !c.Initialized && node.Ready:
			sctx, span := r.claimSpan(ctx, "launcher.initialize", c, node)
			err := r.initialize(sctx, c, node, log)
			if err != nil {
				log.Warn().Err(err).Msg("initializing node")
			}
			endSpan(span, err)
		}
	}
	return nil
}

// claimSpan starts a span of work on a claim's node in the trace that created the claim (its
// fleetwright.io/traceparent annotation): no message carries it, the pass runs on cluster
// changes, yet the node registering and becoming ready belongs to the scale-up.
func (r *registrar) claimSpan(ctx context.Context, name string, c claimState, n nodeState) (context.Context, trace.Span) {
	return otel.Tracer("launcher").Start(telemetry.WithTraceParent(ctx, c.TraceParent), name,
		trace.WithAttributes(attribute.String("fleetwright.nodeclaim", c.Name), attribute.String("fleetwright.node", n.Name),
			attribute.String("fleetwright.nodepool", c.NodePool)))
}

// endSpan records err, if any, and ends the span.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (r *registrar) register(ctx context.Context, c claimState, n nodeState, log zerolog.Logger) error {
	// The claim's labels: its pool (karpenter.sh/nodepool, or a v1alpha5 claim's
	// karpenter.sh/provisioner-name), the pool's own labels and the offering's well-known ones;
	// its annotations, which include the pool template's; and its taints and startup taints, as
	// Karpenter syncs them (user data asked the kubelet for them already, except under the Custom
	// AMI family, whose user data is the class's own).
	labels := map[string]string{karpv1.NodeRegisteredLabelKey: "true"}
	maps.Copy(labels, c.Labels)
	// The node is owned by its claim, as Karpenter's: the claim deleted, the garbage collector
	// deletes the node too (behind its termination finalizer), and kubectl shows whose it is.
	blockOwnerDeletion := true
	owner := &metav1.OwnerReference{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: c.Name,
		UID: types.UID(c.UID), BlockOwnerDeletion: &blockOwnerDeletion}
	if err := r.nodes.Adopt(ctx, n.Name, owner, labels, c.Annotations, c.Taints, []string{unregisteredTaintKey}); err != nil {
		return err
	}
	if changed, err := r.claims.MarkRegistered(ctx, c.Name, n.Name); err != nil || !changed {
		return err // unchanged: registered already, by an earlier pass whose write the cache had not yet
	}
	r.metrics.registered.WithLabelValues(c.NodePool).Inc()
	zone := c.Labels[karpv1.LabelTopologyZone] // the offering's, on a launched claim
	if zone == "" {
		zone = n.Labels[karpv1.LabelTopologyZone] // a hand-made claim's, as the node has it
	}
	r.metrics.karp.nodesCreated.WithLabelValues(c.NodePool, zone).Inc()
	r.events.Eventf(clusterstate.ClaimRef(c.Name, c.UID), corev1.EventTypeNormal, reasonRegistered, "Registered node %s", n.Name)
	r.events.Eventf(clusterstate.NodeRef(n.Name), corev1.EventTypeNormal, reasonRegistered, "Registered for NodeClaim %s", c.Name)
	log.Info().Str("node", n.Name).Str("providerID", c.ProviderID).Msg("registered nodeclaim")
	r.event(ctx, nodesv1.NodeEventKind_NODE_EVENT_KIND_REGISTERED, c, n)
	return nil
}

// initialize marks a Ready node initialized once the pool's startup taints are gone. As in
// Karpenter, they are never removed here: they belong to the agent that removes them when it has
// set the node up (a CNI, a security agent), and the claim waits for it.
func (r *registrar) initialize(ctx context.Context, c claimState, n nodeState, log zerolog.Logger) error {
	for _, t := range c.StartupTaints {
		if slices.ContainsFunc(n.Taints, func(nt *commonv1.Taint) bool { return nt.GetKey() == t.GetKey() && nt.GetEffect() == t.GetEffect() }) {
			return nil // not yet: looked at again on the next pass
		}
	}
	if err := r.nodes.Adopt(ctx, n.Name, nil, map[string]string{"karpenter.sh/initialized": "true"}, nil, nil, nil); err != nil {
		return err
	}
	if changed, err := r.claims.MarkInitialized(ctx, c.Name); err != nil || !changed {
		return err // unchanged: initialized already, by an earlier pass
	}
	r.metrics.initialized.WithLabelValues(c.NodePool).Inc()
	r.events.Eventf(clusterstate.ClaimRef(c.Name, c.UID), corev1.EventTypeNormal, reasonInitialized, "Node %s is ready and initialized", n.Name)
	r.events.Eventf(clusterstate.NodeRef(n.Name), corev1.EventTypeNormal, reasonInitialized, "Ready and initialized for NodeClaim %s", c.Name)
	log.Info().Str("node", n.Name).Msg("initialized nodeclaim")
	r.event(ctx, nodesv1.NodeEventKind_NODE_EVENT_KIND_INITIALIZED, c, n)
	return nil
}

func (r *registrar) event(ctx context.Context, kind nodesv1.NodeEventKind, c claimState, n nodeState) {
	ev := &nodesv1.NodeEvent{Kind: kind, NodeName: n.Name, NodeClaimName: c.Name, ProviderId: c.ProviderID,
		InstanceId: ec2v1.InstanceID(c.ProviderID), NodePoolName: c.NodePool, EventTime: timestamppb.New(r.now()), Labels: n.Labels, Taints: n.Taints}
	id := fmt.Sprintf("%s/%s", c.UID, strings.ToLower(kind.String()))
	if err := r.bus.Publish(ctx, r.prefix.Of(subject.NodesEvents), ev, id); err != nil {
		r.log.Error().Err(err).Msg("publishing node event")
	}
}
