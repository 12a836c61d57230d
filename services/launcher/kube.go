package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/translate"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// kubeStores implement claimStore, nodeClassStore and nodeStore on the Kubernetes API: reads
// from the shared informer cache, writes straight to the API server.
type kubeStores struct {
	cache   *clusterstate.Cache
	dyn     dynamic.Interface
	claims  *kubeClaims
	classes *kubeClasses
	nodes   *kubeNodes
}

func newKubeStores(ctx context.Context, rt *service.Runtime, defaultInstanceProfile string) (kubeStores, error) {
	dyn, err := dynamic.NewForConfig(rt.RESTConfig)
	if err != nil {
		return kubeStores{}, fmt.Errorf("creating dynamic client: %w", err)
	}
	c, err := clusterstate.New(rt.Kube, dyn, clusterstate.Want{Nodes: true, NodeClaims: true, NodeClasses: true, Pools: true}, rt.Log)
	if err != nil {
		return kubeStores{}, err
	}
	rt.Admin.AddReadiness("informers", c.Ready)
	if err := c.Start(ctx); err != nil {
		return kubeStores{}, err
	}
	return kubeStores{cache: c, dyn: dyn, claims: &kubeClaims{cache: c, api: dyn.Resource(clusterstate.NodeClaims)},
		classes: &kubeClasses{cache: c, legacy: translate.Options{DefaultInstanceProfile: defaultInstanceProfile}},
		nodes:   &kubeNodes{cache: c, api: rt.Kube.CoreV1().Nodes()}}, nil
}

type kubeClaims struct {
	cache *clusterstate.Cache
	api   dynamic.NamespaceableResourceInterface
}

// Get reads the claim from the cache; a claim the cache does not know yet (the scheduler
// creates it a moment before publishing its intent) is looked up on the API server before it
// is called gone.
func (k *kubeClaims) Get(ctx context.Context, name string) (claimState, error) {
	if nc, ok := k.cache.Claim(name); ok {
		return stateOf(nc), nil
	}
	nc, err := clusterstate.ReadClaim(ctx, k.api, name)
	if err != nil {
		return claimState{}, claimErr(name, err)
	}
	return stateOf(nc), nil
}

// claimErr names the claim; a claim that does not exist is errClaimNotFound.
func claimErr(name string, err error) error {
	if apierrors.IsNotFound(err) {
		return errClaimNotFound
	}
	return fmt.Errorf("nodeclaim %s: %w", name, err)
}

func stateOf(nc *karpv1.NodeClaim) claimState {
	s := claimState{
		Name: nc.Name, UID: string(nc.UID), NodePool: clusterstate.PoolOf(nc.Labels), ProviderID: nc.Status.ProviderID,
		NodeName: nc.Status.NodeName, Deleting: nc.DeletionTimestamp != nil, Created: nc.CreationTimestamp.Time,
		Registered: nc.IsTrue(karpv1.ConditionTypeRegistered), Initialized: nc.IsTrue(karpv1.ConditionTypeInitialized),
		Labels: maps.Clone(nc.Labels), Annotations: maps.Clone(nc.Annotations),
		Requirements: nc.Spec.Requirements, Requests: nc.Spec.Resources.Requests, Launch: recordOf(nc.Annotations),
		TraceParent: nc.Annotations[telemetry.TraceAnnotation],
	}
	if ref := nc.Spec.NodeClassRef; ref != nil {
		s.NodeClassRef = &commonv1.ObjectRef{Group: ref.Group, Kind: ref.Kind, Name: ref.Name}
	}
	// The scheduler's record of the pods nominated to the claim, the launcher's of its launch,
	// and the claim's trace are the claim's own: they are not synced to the node.
	maps.DeleteFunc(s.Annotations, func(k, _ string) bool {
		return strings.HasPrefix(k, podproj.NominationKeyPrefix) || k == launchRequestedAnnotation || k == launchTemplatesAnnotation ||
			k == telemetry.TraceAnnotation
	})
	for _, t := range nc.Spec.StartupTaints {
		s.StartupTaints = append(s.StartupTaints, &commonv1.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	s.Taints = append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...)
	return s
}

func (k *kubeClaims) List(context.Context) ([]claimState, error) {
	claims := k.cache.Claims()
	out := make([]claimState, 0, len(claims))
	for _, nc := range claims {
		out = append(out, stateOf(nc))
	}
	return out, nil
}

// update applies mutate to the claim as the API server has it now (clusterstate.UpdateClaim).
func (k *kubeClaims) update(ctx context.Context, name string, mutate func(*karpv1.NodeClaim)) error {
	if err := clusterstate.UpdateClaim(ctx, k.api, name, mutate); err != nil {
		return claimErr(name, err)
	}
	return nil
}

func (k *kubeClaims) MarkLaunched(ctx context.Context, name string, info launchInfo) error {
	return k.update(ctx, name, func(nc *karpv1.NodeClaim) {
		if nc.Labels == nil {
			nc.Labels = map[string]string{}
		}
		// Karpenter's well-known labels of the offering launched, which registration puts on
		// the node: the whole instance-type family of labels, zone, zone id, capacity type.
		var facts catalog.InstanceType
		if info.Type != nil {
			facts = catalogkv.Facts(info.Type)
			maps.Copy(nc.Labels, scheduling.TypeLabels(facts))
		}
		nc.Labels[karpv1.LabelInstanceType] = info.InstanceType
		nc.Labels[karpv1.LabelTopologyZone] = info.Zone
		nc.Labels[karpv1.CapacityTypeLabelKey] = info.CapacityType
		if info.ZoneID != "" {
			nc.Labels[ec2v1.LabelTopologyZoneID] = info.ZoneID
		}
		// What drift detection compares with the class later (disruption.Drifted): the hash of
		// the class launched with, replacing the scheduler's (the class may have changed since the
		// claim was made; a Provisioner's AWSNodeTemplate is hashed only here), and the subnet and
		// security groups the instance got.
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		if info.ClassHash != "" {
			nc.Annotations[ec2v1.AnnotationEC2NodeClassHash] = info.ClassHash
			nc.Annotations[ec2v1.AnnotationEC2NodeClassHashVersion] = ec2v1.EC2NodeClassHashVersion
		}
		if info.SubnetID != "" {
			nc.Annotations[disruption.SubnetAnnotation] = info.SubnetID
		}
		if len(info.SecurityGroups) > 0 {
			nc.Annotations[disruption.SecurityGroupsAnnotation] = strings.Join(slices.Sorted(slices.Values(info.SecurityGroups)), ",")
		}
		nc.Status.ProviderID = info.ProviderID
		nc.Status.ImageID = info.ImageID
		if info.Type != nil {
			// What the node will register under its class's settings, as the scheduler planned it
			// (scheduling.NodeResources); settings were validated before the launch.
			if capacity, alloc, err := scheduling.NodeResources(facts, info.Node); err == nil {
				nc.Status.Capacity, nc.Status.Allocatable = podproj.KubeResources(capacity), podproj.KubeResources(alloc)
			}
		}
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
			Message: fmt.Sprintf("instance %s (%s, %s, %s)", info.InstanceID, info.InstanceType, info.Zone, info.CapacityType)})
	})
}

func (k *kubeClaims) MarkRegistered(ctx context.Context, name, nodeName string) (bool, error) {
	var changed bool
	err := k.update(ctx, name, func(nc *karpv1.NodeClaim) {
		changed = nc.Status.NodeName != nodeName || !nc.IsTrue(karpv1.ConditionTypeRegistered)
		nc.Status.NodeName = nodeName
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", Message: "node " + nodeName})
	})
	return changed, err
}

func (k *kubeClaims) MarkInitialized(ctx context.Context, name string) (bool, error) {
	var changed bool
	err := k.update(ctx, name, func(nc *karpv1.NodeClaim) {
		changed = !nc.IsTrue(karpv1.ConditionTypeInitialized) || !nc.IsTrue("Ready")
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", Message: "node is ready"})
		nc.SetCondition(metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "launched, registered and initialized"})
	})
	return changed, err
}

func (k *kubeClaims) Fail(ctx context.Context, name, reason, message string) error {
	err := k.update(ctx, name, func(nc *karpv1.NodeClaim) {
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionFalse, Reason: reason, Message: truncate(message, 1000)})
	})
	if err != nil && !errors.Is(err, errClaimNotFound) {
		return err
	}
	return k.Delete(ctx, name)
}

func (k *kubeClaims) Delete(ctx context.Context, name string) error {
	if err := k.api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting nodeclaim %s: %w", name, err)
	}
	return nil
}

// Pool is the pool of the name as the services act on it (clusterstate.Pool): a NodePool, or a
// Provisioner translated.
func (k *kubeClasses) Pool(name string) (clusterstate.Pool, bool) {
	for _, p := range k.cache.Pools() {
		if p.Name == name {
			return p, true
		}
	}
	return clusterstate.Pool{}, false
}

type kubeClasses struct {
	cache  *clusterstate.Cache
	legacy translate.Options // for v1alpha1 AWSNodeTemplates (their default instance profile)
}

// Get reads the EC2NodeClass the ref names; for v1alpha5 users, whose Provisioner's
// providerRef named an AWSNodeTemplate, the AWSNodeTemplate of that name translated into the
// v1 model when no EC2NodeClass exists.
func (k *kubeClasses) Get(_ context.Context, ref *commonv1.ObjectRef) (nodeClassSpec, error) {
	switch ref.GetKind() {
	case "", "EC2NodeClass", "AWSNodeTemplate":
	default:
		return nodeClassSpec{}, fmt.Errorf("%w: kind %q is not supported (want EC2NodeClass or AWSNodeTemplate)", errNodeClassNotFound, ref.GetKind())
	}
	nc, err := k.cache.NodeClass(ref.GetKind(), ref.GetName(), k.legacy)
	switch {
	case errors.Is(err, clusterstate.ErrNoNodeClass):
		return nodeClassSpec{}, fmt.Errorf("%w: %w", errNodeClassNotFound, err)
	case err != nil:
		return nodeClassSpec{}, bus.Permanent(err)
	}
	s := specOf(nc)
	_, real := clusterstate.Get[ec2v1.EC2NodeClass](k.cache.NodeClasses, ref.GetName())
	s.Translated = ref.GetKind() == "AWSNodeTemplate" || !real
	return s, nil
}

func specOf(nc *ec2v1.EC2NodeClass) nodeClassSpec {
	s := nodeClassSpec{Name: nc.Name, AMIFamily: nc.ResolvedAMIFamily(), Tags: nc.Spec.Tags,
		Kubelet: classKubelet(nc.Spec.Kubelet), BlockDeviceMappings: nc.Spec.BlockDeviceMappings, Hash: nc.Hash(),
		Ready: meta.FindStatusCondition(nc.Status.Conditions, ec2v1.ConditionTypeReady), Generation: nc.Generation}
	if nc.Spec.InstanceStorePolicy != nil {
		s.InstanceStorePolicy = *nc.Spec.InstanceStorePolicy
	}
	if nc.Spec.UserData != nil {
		s.UserData = *nc.Spec.UserData
	}
	s.Role = nc.Spec.Role
	if nc.Spec.InstanceProfile != nil {
		s.InstanceProfile = *nc.Spec.InstanceProfile
	}
	s.Metadata = metadataOf(nc.Spec.MetadataOptions)
	s.PublicIP = nc.Spec.AssociatePublicIPAddress
	s.Monitoring = nc.Spec.DetailedMonitoring != nil && *nc.Spec.DetailedMonitoring
	if nc.Spec.Context != nil {
		s.Context = *nc.Spec.Context
	}
	for _, t := range nc.Spec.AMISelectorTerms {
		s.AMIs = append(s.AMIs, amiTerm{Alias: t.Alias, ID: t.ID, SSMParameter: t.SSMParameter, Name: t.Name, Owner: t.Owner, Tags: t.Tags})
	}
	for _, t := range nc.Spec.SubnetSelectorTerms {
		s.Subnets = append(s.Subnets, selectorTerm{ID: t.ID, Tags: t.Tags})
	}
	for _, t := range nc.Spec.SecurityGroupSelectorTerms {
		s.SecurityGroups = append(s.SecurityGroups, selectorTerm{ID: t.ID, Name: t.Name, Tags: t.Tags})
	}
	return s
}

type kubeNodes struct {
	cache *clusterstate.Cache
	api   typedcorev1.NodeInterface
}

func (k *kubeNodes) List(context.Context) ([]nodeState, error) {
	nodes := k.cache.AllNodes()
	out := make([]nodeState, 0, len(nodes))
	for _, n := range nodes {
		s := nodeState{Name: n.Name, ProviderID: n.Spec.ProviderID, Labels: n.Labels}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				s.Ready = true
			}
		}
		for _, t := range n.Spec.Taints {
			s.Taints = append(s.Taints, &commonv1.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
		}
		out = append(out, s)
	}
	return out, nil
}

// Adopt labels and annotates the node, adds the taints it lacks, removes the taints and puts the termination finalizer on it (so a
// node deleted by hand is drained and its instance terminated first), on the node as the API
// server has it now (an update conflicts, and is retried, if the node changed in between).
func (k *kubeNodes) Adopt(ctx context.Context, name string, owner *metav1.OwnerReference, labels, annotations map[string]string, addTaints []corev1.Taint, removeTaints []string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting node %s: %w", name, err)
		}
		// Taints are synced once, at registration, as in Karpenter: a node registered already
		// (a second pass on a cache a moment behind) keeps the taints it has, so a startup taint
		// its agent removed meanwhile does not come back.
		registered := n.Labels[karpv1.NodeRegisteredLabelKey] == "true"
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, labels)
		if len(annotations) > 0 && n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		maps.Copy(n.Annotations, annotations)
		for _, t := range addTaints {
			if !registered && !slices.ContainsFunc(n.Spec.Taints, func(have corev1.Taint) bool { return have.MatchTaint(&t) }) {
				n.Spec.Taints = append(n.Spec.Taints, t)
			}
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return slices.Contains(removeTaints, t.Key) })
		if n.DeletionTimestamp == nil && !slices.Contains(n.Finalizers, karpv1.TerminationFinalizer) {
			n.Finalizers = append(n.Finalizers, karpv1.TerminationFinalizer)
		}
		if owner != nil && !slices.ContainsFunc(n.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.UID }) {
			n.OwnerReferences = append(n.OwnerReferences, *owner)
		}
		_, err = k.api.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
