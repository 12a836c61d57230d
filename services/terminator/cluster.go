package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
	"github.com/fleetwright/fleetwright/pkg/apis/translate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
)

// Keys the terminator reads and writes besides Karpenter's own.
const (
	// emptinessAnnotation is when the node was last seen becoming empty (RFC 3339), as
	// Karpenter v1alpha5 kept it; shared by replicas and kept across restarts.
	emptinessAnnotation = "karpenter.sh/emptiness-timestamp"
	// intentAnnotation names the intent carrying out a NodeClaim's termination, so the
	// sweeper does not start a second one for a deletion the executor made.
	intentAnnotation = "fleetwright.io/termination-intent"
	// podNodeIndex indexes pods by spec.nodeName in the cache.
	podNodeIndex = "spec.nodeName"
)

// claimRef is what the terminator needs to know of a NodeClaim to terminate it.
type claimRef struct {
	Name       string
	UID        string
	NodeName   string
	InstanceID string
	ProviderID string
	Pool       string
	Grace      *time.Duration // terminationGracePeriod; nil waits for the drain
}

// kube reads the cluster from an informer cache and writes straight to the API server.
type kube struct {
	cached client.Client // reads from the cache
	direct client.Client // reads and writes the API server
	legacy bool          // the v1alpha5 Provisioner API is served
}

func newKube(ctx context.Context, rt *service.Runtime) (*kube, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, v1alpha5.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building scheme: %w", err)
		}
	}
	k := &kube{}
	if _, err := rt.Kube.Discovery().ServerResourcesForGroupVersion(v1alpha5.SchemeGroupVersion.String()); err == nil {
		k.legacy = true
	}
	crlog.SetLogger(telemetry.Logr(rt.Log.With().Str("component", "controller-runtime").Logger()))
	c, err := cache.New(rt.RESTConfig, cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, fmt.Errorf("creating informer cache: %w", err)
	}
	if err := c.IndexField(ctx, &corev1.Pod{}, podNodeIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return nil, fmt.Errorf("indexing pods by node: %w", err)
	}
	watch := []client.Object{&karpv1.NodeClaim{}, &karpv1.NodePool{}, &corev1.Node{}, &corev1.Pod{}}
	if k.legacy {
		watch = append(watch, &v1alpha5.Provisioner{})
	}
	for _, obj := range watch {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	if k.cached, err = client.New(rt.RESTConfig, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}}); err != nil {
		return nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	if k.direct, err = client.New(rt.RESTConfig, client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	return k, nil
}

// refOf describes a NodeClaim.
func refOf(nc *karpv1.NodeClaim) claimRef {
	r := claimRef{Name: nc.Name, UID: string(nc.UID), NodeName: nc.Status.NodeName, ProviderID: nc.Status.ProviderID,
		InstanceID: ec2v1.InstanceID(nc.Status.ProviderID), Pool: poolOf(nc.Labels)}
	if g := nc.Spec.TerminationGracePeriod; g != nil {
		d := g.Duration
		r.Grace = &d
	}
	return r
}

// poolOf is the NodePool (or v1alpha5 Provisioner) named by a NodeClaim's or Node's labels.
func poolOf(labels map[string]string) string {
	if p := labels[karpv1.NodePoolLabelKey]; p != "" {
		return p
	}
	return labels[v1alpha5.ProvisionerNameLabelKey]
}

// claimForInstance finds the NodeClaim running an instance.
func (k *kube) claimForInstance(ctx context.Context, id string) (claimRef, bool) {
	var list karpv1.NodeClaimList
	if err := k.cached.List(ctx, &list); err != nil {
		return claimRef{}, false
	}
	for i := range list.Items {
		if ec2v1.InstanceID(list.Items[i].Status.ProviderID) == id {
			return refOf(&list.Items[i]), true
		}
	}
	return claimRef{}, false
}

// podsOn lists the pods bound to a node, from the cache.
func (k *kube) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := k.cached.List(ctx, &list, client.MatchingFields{podNodeIndex: node}); err != nil {
		return nil, fmt.Errorf("listing pods on %s: %w", node, err)
	}
	return list.Items, nil
}

// emptyAfter is how long a pool's nodes may stay empty; nil means forever.
type poolPolicies map[string]*time.Duration

// policies reads each pool's emptiness policy: NodePools' consolidateAfter under WhenEmpty or
// WhenEmptyOrUnderutilized, Provisioners' ttlSecondsAfterEmpty (translated into the v1 model).
func (k *kube) policies(ctx context.Context) (poolPolicies, error) {
	out := poolPolicies{}
	var pools karpv1.NodePoolList
	if err := k.cached.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing nodepools: %w", err)
	}
	for i := range pools.Items {
		out[pools.Items[i].Name] = emptyAfter(pools.Items[i].Spec.Disruption)
	}
	if !k.legacy {
		return out, nil
	}
	var provs v1alpha5.ProvisionerList
	if err := k.cached.List(ctx, &provs); err != nil {
		return nil, fmt.Errorf("listing provisioners: %w", err)
	}
	for i := range provs.Items {
		if _, taken := out[provs.Items[i].Name]; taken {
			continue
		}
		np, err := translate.NodePool(&provs.Items[i])
		if err != nil {
			continue
		}
		out[np.Name] = emptyAfter(np.Spec.Disruption)
	}
	return out, nil
}

func emptyAfter(d karpv1.Disruption) *time.Duration {
	switch d.ConsolidationPolicy {
	case karpv1.ConsolidationPolicyWhenEmpty, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized:
		return d.ConsolidateAfter.Duration
	}
	return nil
}

// candidates describes every launched NodeClaim for the decision stages.
func (k *kube) candidates(ctx context.Context) ([]candidate, error) {
	pols, err := k.policies(ctx)
	if err != nil {
		return nil, err
	}
	var claims karpv1.NodeClaimList
	if err := k.cached.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	var out []candidate
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.ProviderID == "" {
			continue
		}
		c := candidate{claimRef: refOf(nc), Created: nc.CreationTimestamp.Time, Initialized: nc.IsTrue(karpv1.ConditionTypeInitialized),
			Disrupting: nc.DeletionTimestamp != nil, EmptyAfter: pols[poolOf(nc.Labels)], ExpireAfter: nc.Spec.ExpireAfter.Duration,
			ClaimUnfinalized: nc.Status.NodeName != "" && nc.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer)}
		if c.NodeName != "" {
			var node corev1.Node
			if err := k.cached.Get(ctx, client.ObjectKey{Name: c.NodeName}, &node); err != nil {
				continue // not cached yet, or gone
			}
			pods, err := k.podsOn(ctx, node.Name)
			if err != nil {
				return nil, err
			}
			describeNode(&c, &node, pods)
		}
		out = append(out, c)
	}
	return out, nil
}

// describeNode fills in what the node and its pods say: disrupting, empty since, blocked.
func describeNode(c *candidate, node *corev1.Node, pods []corev1.Pod) {
	c.HasNode = true
	c.NodeUnfinalized = node.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer)
	c.Disrupting = c.Disrupting || node.DeletionTimestamp != nil || hasDisruptedTaint(node)
	if ts := node.Annotations[emptinessAnnotation]; ts != "" {
		if t, err := time.Parse(time.RFC3339, ts); err == nil {
			c.EmptySince = t
		}
	}
	if node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
		c.BlockedBy = "node " + node.Name
	}
	c.Empty = true
	for i := range pods {
		p := &pods[i]
		if !active(p) {
			continue
		}
		if c.BlockedBy == "" && p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			c.BlockedBy = "pod " + p.Namespace + "/" + p.Name
		}
		if !podproj.StaysWithNode(p) {
			c.Empty = false
		}
	}
}

// active reports a pod that is neither finished nor on its way out.
func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}
