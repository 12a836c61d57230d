package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	ec2v1alpha1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/translate"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// kubeStores implement claimStore, nodeClassStore and nodeStore on the Kubernetes API: reads
// from an informer cache, writes straight to the API server.
type kubeStores struct {
	claims  *kubeClaims
	classes *kubeClasses
	nodes   *kubeNodes
}

func newKubeStores(ctx context.Context, rt *service.Runtime, defaultInstanceProfile string) (kubeStores, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, ec2v1.AddToScheme, ec2v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return kubeStores{}, fmt.Errorf("building scheme: %w", err)
		}
	}
	crlog.SetLogger(telemetry.Logr(rt.Log.With().Str("component", "controller-runtime").Logger()))
	c, err := cache.New(rt.RESTConfig, cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return kubeStores{}, fmt.Errorf("creating informer cache: %w", err)
	}
	cl, err := client.New(rt.RESTConfig, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		return kubeStores{}, fmt.Errorf("creating kubernetes client: %w", err)
	}
	// Ask for the informers now so the cache syncs them before the first intent.
	for _, obj := range []client.Object{&karpv1.NodeClaim{}, &corev1.Node{}, &ec2v1.EC2NodeClass{}, &ec2v1alpha1.AWSNodeTemplate{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return kubeStores{}, fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return kubeStores{}, fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	// Read-modify-write goes to the API server directly: a cache may lag behind our own writes.
	direct, err := client.New(rt.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		return kubeStores{}, fmt.Errorf("creating kubernetes client: %w", err)
	}
	return kubeStores{claims: &kubeClaims{c: cl, direct: direct}, classes: &kubeClasses{c: cl, defaultInstanceProfile: defaultInstanceProfile},
		nodes: &kubeNodes{c: cl, direct: direct}}, nil
}

type kubeClaims struct{ c, direct client.Client }

// get reads the claim from the cache; a claim the cache does not know yet (the scheduler
// creates it a moment before publishing its intent) is looked up on the API server before it
// is called gone.
func (k *kubeClaims) get(ctx context.Context, name string) (*karpv1.NodeClaim, error) {
	nc, err := getClaim(ctx, k.c, name)
	if errors.Is(err, errClaimNotFound) {
		return getClaim(ctx, k.direct, name)
	}
	return nc, err
}

func getClaim(ctx context.Context, c client.Reader, name string) (*karpv1.NodeClaim, error) {
	var nc karpv1.NodeClaim
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errClaimNotFound
		}
		return nil, fmt.Errorf("getting nodeclaim %s: %w", name, err)
	}
	return &nc, nil
}

func (k *kubeClaims) Get(ctx context.Context, name string) (claimState, error) {
	nc, err := k.get(ctx, name)
	if err != nil {
		return claimState{}, err
	}
	return stateOf(nc), nil
}

func stateOf(nc *karpv1.NodeClaim) claimState {
	s := claimState{
		Name: nc.Name, UID: string(nc.UID), NodePool: nc.Labels[karpv1.NodePoolLabelKey], ProviderID: nc.Status.ProviderID,
		NodeName: nc.Status.NodeName, Deleting: nc.DeletionTimestamp != nil, Created: nc.CreationTimestamp.Time,
		Registered: nc.IsTrue(karpv1.ConditionTypeRegistered), Initialized: nc.IsTrue(karpv1.ConditionTypeInitialized),
		Labels: map[string]string{},
	}
	if c := nc.Condition(karpv1.ConditionTypeLaunched); c != nil && c.Status == metav1.ConditionTrue {
		s.LaunchTime = c.LastTransitionTime.Time
	}
	for k, v := range nc.Labels {
		s.Labels[k] = v
	}
	for _, t := range nc.Spec.StartupTaints {
		s.StartupTaints = append(s.StartupTaints, &commonv1.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return s
}

func (k *kubeClaims) List(ctx context.Context) ([]claimState, error) {
	var list karpv1.NodeClaimList
	if err := k.c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	out := make([]claimState, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, stateOf(&list.Items[i]))
	}
	return out, nil
}

// update reads the claim fresh from the API server and applies mutate to it, retrying on
// conflicts; mutate changes labels (metadata) and status in one go.
func (k *kubeClaims) update(ctx context.Context, name string, mutate func(*karpv1.NodeClaim)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc, err := getClaim(ctx, k.direct, name)
		if err != nil {
			return err
		}
		before := nc.DeepCopy()
		mutate(nc)
		if !equalLabels(before.Labels, nc.Labels) {
			// Patch a copy: the response would overwrite nc's status, which the main resource
			// ignores, before the status patch below could send it.
			if err := k.c.Patch(ctx, nc.DeepCopy(), client.MergeFrom(before)); err != nil {
				return err
			}
		}
		return k.c.Status().Patch(ctx, nc, client.MergeFrom(before))
	})
}

func (k *kubeClaims) MarkLaunched(ctx context.Context, name string, info launchInfo) error {
	return k.update(ctx, name, func(nc *karpv1.NodeClaim) {
		if nc.Labels == nil {
			nc.Labels = map[string]string{}
		}
		nc.Labels[karpv1.LabelInstanceType] = info.InstanceType
		nc.Labels[karpv1.LabelTopologyZone] = info.Zone
		nc.Labels[karpv1.CapacityTypeLabelKey] = info.CapacityType
		nc.Status.ProviderID = info.ProviderID
		nc.Status.ImageID = info.ImageID
		if it, ok := catalog.Lookup(info.InstanceType); ok {
			nc.Status.Capacity = corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(int64(it.VCPU), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(it.MemoryMiB<<20, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(int64(it.MaxPods), resource.DecimalSI),
			}
		}
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
			Message: fmt.Sprintf("instance %s (%s, %s, %s)", info.InstanceID, info.InstanceType, info.Zone, info.CapacityType)})
	})
}

func (k *kubeClaims) MarkRegistered(ctx context.Context, name, nodeName string) error {
	return k.update(ctx, name, func(nc *karpv1.NodeClaim) {
		nc.Status.NodeName = nodeName
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", Message: "node " + nodeName})
	})
}

func (k *kubeClaims) MarkInitialized(ctx context.Context, name string) error {
	return k.update(ctx, name, func(nc *karpv1.NodeClaim) {
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", Message: "node is ready"})
		nc.SetCondition(metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "launched, registered and initialized"})
	})
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
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k.c.Delete(ctx, nc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting nodeclaim %s: %w", name, err)
	}
	return nil
}

type kubeClasses struct {
	c                      client.Client
	defaultInstanceProfile string // for v1alpha1 AWSNodeTemplates without one
}

// Get reads the EC2NodeClass the ref names; for v1alpha5 users, whose Provisioner's
// providerRef named an AWSNodeTemplate, an AWSNodeTemplate of that name is translated into the
// v1 model (pkg/apis/translate) when no EC2NodeClass exists.
func (k *kubeClasses) Get(ctx context.Context, ref *commonv1.ObjectRef) (nodeClassSpec, error) {
	switch ref.GetKind() {
	case "", "EC2NodeClass", "AWSNodeTemplate":
	default:
		return nodeClassSpec{}, fmt.Errorf("%w: kind %q is not supported (want EC2NodeClass or AWSNodeTemplate)", errNodeClassNotFound, ref.GetKind())
	}
	if ref.GetKind() != "AWSNodeTemplate" {
		var nc ec2v1.EC2NodeClass
		err := k.c.Get(ctx, client.ObjectKey{Name: ref.GetName()}, &nc)
		if err == nil {
			return specOf(&nc), nil
		}
		if !apierrors.IsNotFound(err) {
			return nodeClassSpec{}, fmt.Errorf("getting EC2NodeClass %s: %w", ref.GetName(), err)
		}
	}
	var tmpl ec2v1alpha1.AWSNodeTemplate
	if err := k.c.Get(ctx, client.ObjectKey{Name: ref.GetName()}, &tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nodeClassSpec{}, fmt.Errorf("%w: no EC2NodeClass or AWSNodeTemplate named %q", errNodeClassNotFound, ref.GetName())
		}
		return nodeClassSpec{}, fmt.Errorf("getting AWSNodeTemplate %s: %w", ref.GetName(), err)
	}
	nc, err := translate.EC2NodeClass(&tmpl, translate.Options{DefaultInstanceProfile: k.defaultInstanceProfile})
	if err != nil {
		return nodeClassSpec{}, bus.Permanent(fmt.Errorf("translating AWSNodeTemplate %s: %w", ref.GetName(), err))
	}
	return specOf(nc), nil
}

func specOf(nc *ec2v1.EC2NodeClass) nodeClassSpec {
	s := nodeClassSpec{Name: nc.Name, AMIFamily: nc.ResolvedAMIFamily(), Tags: nc.Spec.Tags}
	if nc.Spec.UserData != nil {
		s.UserData = *nc.Spec.UserData
	}
	if nc.Spec.InstanceProfile != nil {
		s.InstanceProfile = *nc.Spec.InstanceProfile
	}
	for _, t := range nc.Spec.AMISelectorTerms {
		s.AMIs = append(s.AMIs, amiTerm{Alias: t.Alias, ID: t.ID, Name: t.Name, Owner: t.Owner, Tags: t.Tags})
	}
	for _, t := range nc.Spec.SubnetSelectorTerms {
		s.Subnets = append(s.Subnets, selectorTerm{ID: t.ID, Tags: t.Tags})
	}
	for _, t := range nc.Spec.SecurityGroupSelectorTerms {
		s.SecurityGroups = append(s.SecurityGroups, selectorTerm{ID: t.ID, Name: t.Name, Tags: t.Tags})
	}
	return s
}

type kubeNodes struct{ c, direct client.Client }

func (k *kubeNodes) List(ctx context.Context) ([]nodeState, error) {
	var list corev1.NodeList
	if err := k.c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make([]nodeState, 0, len(list.Items))
	for _, n := range list.Items {
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

func (k *kubeNodes) Adopt(ctx context.Context, name string, labels map[string]string, removeTaints []string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := k.direct.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return fmt.Errorf("getting node %s: %w", name, err)
		}
		before := n.DeepCopy()
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range labels {
			n.Labels[k] = v
		}
		remove := map[string]bool{}
		for _, t := range removeTaints {
			remove[t] = true
		}
		kept := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if !remove[t.Key] {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
		return k.c.Patch(ctx, &n, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
