package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
)

// adoptedAnnotation marks a NodeClaim made for a node an older Karpenter launched; its value
// says from what.
const adoptedAnnotation = "fleetwright.io/adopted"

const reasonAdopted = "Adopted"

// legacyNodes gives each node that Karpenter v0.2x launched — a Node labelled
// karpenter.sh/provisioner-name with no NodeClaim, its instance tagged with the Provisioner and
// the cluster — a NodeClaim of its own, named after the node, as if Fleetwright had launched it:
// from then on it is emptied, expired, drifted, consolidated, interrupted and terminated like
// any other. The claim is made first, then its instance is tagged with the claim and pool
// (karpenter.sh/nodeclaim, karpenter.sh/nodepool), the tags without which the terminator may not
// terminate it: a launcher that dies between the two leaves a claim whose instance is not yet
// tagged (the next pass tags it), never a tagged instance without a claim, which the
// terminator's orphan collector would take for its own to end. Nothing is launched. A node whose
// instance is not tagged for this cluster and its Provisioner is left alone, with a warning: it
// is not ours to take.
type legacyNodes struct {
	*launcher
	cache  *clusterstate.Cache
	claims dynamic.NamespaceableResourceInterface
	nodes  nodeStore
	warned map[string]string // node → why it was not adopted, logged once
}

// pass adopts every node that needs it; one node's failure does not stop the others.
func (a *legacyNodes) pass(ctx context.Context) error {
	claimed := map[string]bool{} // provider IDs and node names with a claim
	byName := map[string]*karpv1.NodeClaim{}
	for _, nc := range a.cache.Claims() {
		byName[nc.Name] = nc
		claimed[nc.Status.ProviderID] = true
		claimed[nc.Status.NodeName] = true
	}
	pools := map[string]clusterstate.Pool{}
	for _, p := range a.cache.Pools() {
		if p.Legacy {
			pools[p.Name] = p
		}
	}
	var errs []error
	for _, n := range a.cache.AllNodes() {
		prov := n.Labels[v1alpha5.ProvisionerNameLabelKey]
		if prov == "" || n.DeletionTimestamp != nil ||
			ec2v1.InstanceID(n.Spec.ProviderID) == "" || claimed[n.Spec.ProviderID] || claimed[n.Name] {
			continue
		}
		nc := byName[n.Name]
		if nc != nil {
			if _, ours := nc.Annotations[adoptedAnnotation]; !ours || nc.Status.ProviderID != "" || nc.DeletionTimestamp != nil {
				continue
			}
			// Created, its instance perhaps not yet tagged and its status not yet written: the
			// adoption is finished below.
		}
		pool, ok := pools[prov]
		if !ok {
			a.warn(n.Name, "its Provisioner "+prov+" does not exist")
			continue
		}
		if err := a.adopt(ctx, n, pool, nc != nil); err != nil {
			errs = append(errs, fmt.Errorf("adopting node %s: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}

// adopt makes the node's claim (unless claimed says an earlier pass made it), then tags its
// instance and records the claim's status. Each step is idempotent, so a pass that failed or
// died at any step is finished by the next.
func (a *legacyNodes) adopt(ctx context.Context, n *corev1.Node, pool clusterstate.Pool, claimed bool) error {
	id := ec2v1.InstanceID(n.Spec.ProviderID)
	out, err := a.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return fmt.Errorf("describing instance %s: %w", id, err)
	}
	var inst *ec2types.Instance
	for _, r := range out.Reservations {
		for i := range r.Instances {
			inst = &r.Instances[i]
		}
	}
	if inst == nil || inst.State == nil || inst.State.Name != ec2types.InstanceStateNameRunning {
		return nil // going or gone: the node goes with it
	}
	tags := map[string]string{}
	for _, t := range inst.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	switch claim := tags[ec2v1.TagNodeClaim]; {
	case claim != "" && claim != n.Name:
		// Launched for a NodeClaim (by Fleetwright, or Karpenter v1): its claim exists, and a
		// cache a moment behind the launch does not show it yet. Never a v0.2x node.
		return nil
	case claim == n.Name && tags[karpv1.NodePoolLabelKey] == pool.Name:
		// Tagged by an earlier pass (or by a launcher that tagged before it made the claim).
	case tags["kubernetes.io/cluster/"+a.cfg.ClusterName] != "owned" || tags[v1alpha5.ProvisionerNameLabelKey] != pool.Name:
		a.warn(n.Name, fmt.Sprintf("instance %s is not tagged kubernetes.io/cluster/%s=owned and %s=%s",
			id, a.cfg.ClusterName, v1alpha5.ProvisionerNameLabelKey, pool.Name))
		return nil
	}
	if !claimed {
		created, err := clusterstate.CreateClaim(ctx, a.claims, adoptedClaim(n, pool))
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating nodeclaim: %w", err)
		}
		if created != nil {
			a.events.Eventf(clusterstate.ClaimRef(created.Name, string(created.UID)), corev1.EventTypeNormal, reasonAdopted,
				"Adopted node %s (instance %s) launched by Karpenter for Provisioner %s", n.Name, id, pool.Name)
		}
	}
	faultpoint.Reach(faultpoint.LauncherMidAdoption)
	if tags[ec2v1.TagNodeClaim] != n.Name || tags[karpv1.NodePoolLabelKey] != pool.Name {
		if _, err := a.api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{
			{Key: aws.String(ec2v1.TagNodeClaim), Value: aws.String(n.Name)},
			{Key: aws.String(karpv1.NodePoolLabelKey), Value: aws.String(pool.Name)},
		}}); err != nil {
			return fmt.Errorf("tagging instance %s: %w", id, err)
		}
	}
	a.log.Info().Str("node", n.Name).Str("instance", id).Str("provisioner", pool.Name).Msg("adopted node launched by Karpenter v1alpha5")
	return a.record(ctx, n.Name, n)
}

// record writes the adopted claim's status — launched, registered and initialized, the node's
// capacity — and puts the termination finalizer on the node.
func (a *legacyNodes) record(ctx context.Context, claim string, n *corev1.Node) error {
	if err := a.nodes.Adopt(ctx, n.Name, nil, map[string]string{karpv1.NodeRegisteredLabelKey: "true", "karpenter.sh/initialized": "true"},
		nil, nil, nil); err != nil {
		return err
	}
	return clusterstate.UpdateClaim(ctx, a.claims, claim, func(nc *karpv1.NodeClaim) {
		nc.Status.ProviderID, nc.Status.NodeName = n.Spec.ProviderID, n.Name
		nc.Status.Capacity, nc.Status.Allocatable = n.Status.Capacity.DeepCopy(), n.Status.Allocatable.DeepCopy()
		for _, t := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
			nc.SetCondition(metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reasonAdopted,
				Message: "node " + n.Name + " was launched by Karpenter v1alpha5 and adopted"})
		}
	})
}

// adoptedClaim is the claim Fleetwright would have made for the node: the Provisioner's
// template (node class, taints, lifetimes), the node's own labels, requirements narrowed to the
// node's instance type, zone and capacity type, and the pool's hash, so the claim drifts only
// when the Provisioner changes or the node does not meet it.
func adoptedClaim(n *corev1.Node, pool clusterstate.Pool) *karpv1.NodeClaim {
	tmpl := pool.Spec.Template
	nc := &karpv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{}, Finalizers: []string{karpv1.TerminationFinalizer},
			Annotations: maps.Clone(tmpl.ObjectMeta.Annotations)},
		Spec: karpv1.NodeClaimSpec{Taints: tmpl.Spec.Taints, StartupTaints: tmpl.Spec.StartupTaints, NodeClassRef: tmpl.Spec.NodeClassRef,
			ExpireAfter: tmpl.Spec.ExpireAfter, TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod},
	}
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[adoptedAnnotation] = "karpenter.sh/v1alpha5 node " + n.Name
	nc.Annotations[karpv1.NodePoolHashAnnotationKey] = pool.Hash()
	nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] = karpv1.NodePoolHashVersion
	for k, v := range n.Labels {
		if k != corev1.LabelHostname {
			nc.Labels[k] = v
		}
	}
	for _, key := range []string{karpv1.LabelInstanceType, karpv1.LabelTopologyZone, karpv1.CapacityTypeLabelKey} {
		if v := n.Labels[key]; v != "" {
			nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
				Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
		}
	}
	slices.SortFunc(nc.Spec.Requirements, func(x, y karpv1.NodeSelectorRequirementWithMinValues) int { return strings.Compare(x.Key, y.Key) })
	return nc
}

// warn logs once per node and reason why a v1alpha5 node is left alone.
func (a *legacyNodes) warn(node, why string) {
	if a.warned[node] == why {
		return
	}
	if len(a.warned) > 10000 {
		clear(a.warned)
	}
	a.warned[node] = why
	a.log.Warn().Str("node", node).Str("reason", why).Msg("not adopting node launched by Karpenter v1alpha5")
}
