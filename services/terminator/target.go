package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// errRefused ends, dead-lettered with its reason, an intent the objects do not bear out: an
// interruption on the wrong subject, a node nobody is deleting, an instance that is not the
// claimless one the intent says. Retrying cannot change it.
var errRefused = errors.New("refused")

// claimTag names, on an instance the launcher started, the NodeClaim it was launched for.
const claimTag = ec2v1.TagNodeClaim

// target is what an intent's termination acts on, read afresh from the API server and EC2:
// the objects decide, and the intent only names them.
type target struct {
	claim    *karpv1.NodeClaim // nil: there is none (any more)
	node     *corev1.Node      // nil: there is none (any more)
	nodeName string            // the node's name, or the name it had
	instance string            // the EC2 instance to terminate; "" for none
}

// target reads what the intent names. The node is the claim's; the intent's own node_name
// counts only when the claim has not recorded one yet and that node runs the claim's instance,
// or when there is no claim and the node is being deleted (or AWS is taking it: an
// interruption). The instance is the claim's, else the node's; the intent's instance_id counts
// only when neither is there, and then only once verified (verifyInstance).
func (e *executor) target(ctx context.Context, in *terminationv1.TerminationIntent, interruption bool, log zerolog.Logger) (target, error) {
	claim, err := e.claim(ctx, in.GetNodeClaimName())
	if err != nil {
		return target{}, err
	}
	t := target{claim: claim, nodeName: in.GetNodeName()}
	if claim != nil && claim.Status.NodeName != "" {
		t.nodeName = claim.Status.NodeName
	}
	node, err := e.k.nodes.find(ctx, t.nodeName)
	if err != nil {
		return t, err
	}
	switch {
	case node == nil, claim != nil && claim.Status.NodeName != "":
	case claim != nil:
		if claim.Status.ProviderID == "" || node.Spec.ProviderID != claim.Status.ProviderID {
			log.Warn().Str("node", node.Name).Str("node_provider_id", node.Spec.ProviderID).Str("claim_provider_id", claim.Status.ProviderID).
				Msg("the intent names a node that does not run its claim's instance; the node is left alone")
			node, t.nodeName = nil, ""
		}
	case node.DeletionTimestamp == nil && !interruption:
		return t, fmt.Errorf("node %s is not being deleted and no NodeClaim %q is: %w (a termination acts on a deleting NodeClaim or Node)",
			node.Name, in.GetNodeClaimName(), errRefused)
	}
	t.node = node
	switch {
	case claim != nil && claim.Status.ProviderID != "":
		t.instance = ec2v1.InstanceID(claim.Status.ProviderID)
	case node != nil:
		t.instance = ec2v1.InstanceID(node.Spec.ProviderID)
	case in.GetInstanceId() != "":
		if t.instance, err = e.verifyInstance(ctx, in.GetInstanceId(), claim); err != nil {
			return t, err
		}
	}
	if id := in.GetInstanceId(); id != "" && t.instance != "" && id != t.instance {
		log.Warn().Str("intent_instance", id).Str("instance", t.instance).Msg("the intent names another instance than its claim's or node's; the claim's or node's is the one")
	}
	return t, nil
}

// verifyInstance checks an instance only an intent names (no claim or node records it) before
// it is terminated: it must be this cluster's (owned), launched for the intent's claim if there
// is one, and otherwise claimless (the claim it was launched for is gone and no claim records
// it), and no Node with pods may run on it. It returns "" for an instance EC2 no longer knows.
func (e *executor) verifyInstance(ctx context.Context, id string, claim *karpv1.NodeClaim) (string, error) {
	inst, err := describeInstance(ctx, e.ec2, id)
	if err != nil || inst == nil {
		return "", err
	}
	if !owned(inst.Tags, e.cluster) {
		return "", fmt.Errorf("refusing to terminate instance %s: %w (kubernetes.io/cluster/%s=owned and %s)", id, errNotOwned, e.cluster, nodePoolTag)
	}
	launchedFor := tag(inst.Tags, claimTag)
	if claim != nil {
		if launchedFor != claim.Name {
			return "", fmt.Errorf("instance %s was launched for nodeclaim %q, not %s: %w", id, launchedFor, claim.Name, errRefused)
		}
		return id, nil
	}
	if launchedFor != "" {
		if nc, err := e.claim(ctx, launchedFor); err != nil {
			return "", err
		} else if nc != nil {
			return "", fmt.Errorf("instance %s belongs to nodeclaim %s, which exists: %w", id, launchedFor, errRefused)
		}
	}
	if e.k.cache != nil {
		if nc, ok := e.k.cache.ClaimOfInstance(id); ok {
			return "", fmt.Errorf("instance %s belongs to nodeclaim %s: %w", id, nc.Name, errRefused)
		}
	}
	node, err := e.nodeOfInstance(ctx, id, aws.ToString(inst.PrivateDnsName))
	if err != nil || node == nil {
		return id, err
	}
	pods, err := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
	if err != nil {
		return "", fmt.Errorf("listing pods on %s: %w", node.Name, err)
	}
	now := e.now()
	for i := range pods.Items {
		if p := &pods.Items[i]; waitsFor(p, now) {
			return "", fmt.Errorf("instance %s still runs node %s with pod %s/%s: %w (it goes when the node is deleted)",
				id, node.Name, p.Namespace, p.Name, errRefused)
		}
	}
	return id, nil
}

// nodeOfInstance finds the Node running an instance: by its private DNS name (how nodes on EC2
// are named), else among the cached nodes by provider id.
func (e *executor) nodeOfInstance(ctx context.Context, id, dnsName string) (*corev1.Node, error) {
	n, err := e.k.nodes.find(ctx, dnsName)
	if err != nil {
		return nil, err
	}
	if n != nil && ec2v1.InstanceID(n.Spec.ProviderID) == id {
		return n, nil
	}
	if e.k.cache == nil {
		return nil, nil
	}
	for _, c := range e.k.cache.AllNodes() {
		if ec2v1.InstanceID(c.Spec.ProviderID) == id {
			return c, nil
		}
	}
	return nil, nil
}
