package main

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// The Karpenter resources the scheduler reads (and, for NodeClaims, writes).
var (
	nodePoolsGVR       = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	nodeClaimsGVR      = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	nodeClassesGVR     = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
	provisionersGVR    = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1alpha5", Resource: "provisioners"}
	nodeTemplatesGVR   = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1alpha1", Resource: "awsnodetemplates"}
	indexByNode        = "node"
	indexByNomination  = "nomination"
	errCachesNotSynced = fmt.Errorf("informer caches not synced yet")
)

// cluster holds the informers the scheduler reads the cluster through. Core types come from
// client-go's typed informers, Karpenter's resources from dynamic informers that convert them
// into their Go types once, as they enter the cache (clusterstate.Typed).
type cluster struct {
	dyn dynamic.Interface

	pods, nodes, daemonSets                                     cache.SharedIndexInformer
	nodePools, nodeClaims, nodeClasses, provisioners, templates cache.SharedIndexInformer
	volumes                                                     podproj.Listers

	factories []interface{ Start(<-chan struct{}) }
	synced    []cache.InformerSynced
}

func newCluster(rt runtimeClients) (*cluster, error) {
	c := &cluster{dyn: rt.dyn}
	core := informers.NewSharedInformerFactory(rt.kube, 0)
	c.pods = core.Core().V1().Pods().Informer()
	if err := c.pods.AddIndexers(cache.Indexers{
		indexByNode: func(o any) ([]string, error) {
			if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				return []string{p.Spec.NodeName}, nil
			}
			return nil, nil
		},
		indexByNomination: func(o any) ([]string, error) {
			if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName == "" && p.Annotations[podproj.NominationAnnotation] != "" {
				return []string{p.Annotations[podproj.NominationAnnotation]}, nil
			}
			return nil, nil
		},
	}); err != nil {
		return nil, fmt.Errorf("indexing pods: %w", err)
	}
	c.nodes = core.Core().V1().Nodes().Informer()
	c.daemonSets = core.Apps().V1().DaemonSets().Informer()
	claims, pvs, classes := core.Core().V1().PersistentVolumeClaims(), core.Core().V1().PersistentVolumes(), core.Storage().V1().StorageClasses()
	c.volumes = podproj.Listers{Claims: claims.Lister(), Volumes: pvs.Lister(), Classes: classes.Lister()}

	dyn := dynamicinformer.NewDynamicSharedInformerFactory(rt.dyn, 0)
	c.nodePools = dyn.ForResource(nodePoolsGVR).Informer()
	c.nodeClaims = dyn.ForResource(nodeClaimsGVR).Informer()
	c.nodeClasses = dyn.ForResource(nodeClassesGVR).Informer()
	typed := []error{c.nodePools.SetTransform(clusterstate.Typed[karpv1.NodePool]()),
		c.nodeClaims.SetTransform(clusterstate.Typed[karpv1.NodeClaim]()),
		c.nodeClasses.SetTransform(clusterstate.Typed[ec2v1.EC2NodeClass]())}
	informers := []cache.SharedIndexInformer{c.pods, c.nodes, c.daemonSets, claims.Informer(), pvs.Informer(),
		classes.Informer(), c.nodePools, c.nodeClaims, c.nodeClasses}
	// The v1alpha5 generation is optional: without its CRDs there is nothing to translate.
	legacy, err := served(rt.kube, provisionersGVR, nodeTemplatesGVR)
	if err != nil {
		return nil, err
	}
	if legacy {
		c.provisioners = dyn.ForResource(provisionersGVR).Informer()
		c.templates = dyn.ForResource(nodeTemplatesGVR).Informer()
		typed = append(typed, c.provisioners.SetTransform(clusterstate.Typed[v1alpha5.Provisioner]()),
			c.templates.SetTransform(clusterstate.Typed[v1alpha1.AWSNodeTemplate]()))
		informers = append(informers, c.provisioners, c.templates)
	}
	for _, inf := range []cache.SharedIndexInformer{c.pods, c.nodes, c.daemonSets, claims.Informer(), pvs.Informer(), classes.Informer()} {
		typed = append(typed, inf.SetTransform(clusterstate.StripManagedFields))
	}
	if err := errors.Join(typed...); err != nil {
		return nil, fmt.Errorf("reading karpenter resources as typed objects: %w", err)
	}
	c.factories = []interface{ Start(<-chan struct{}) }{core, dyn}
	for _, inf := range informers {
		c.synced = append(c.synced, inf.HasSynced)
	}
	return c, nil
}

// served reports whether the API server serves all the resources.
func served(kube kubernetes.Interface, gvrs ...schema.GroupVersionResource) (bool, error) {
	for _, gvr := range gvrs {
		list, err := kube.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("discovering %s: %w", gvr.GroupVersion(), err)
		}
		found := false
		for _, r := range list.APIResources {
			found = found || r.Name == gvr.Resource
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}

// runtimeClients are the API clients the cluster view needs.
type runtimeClients struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func (c *cluster) start(ctx context.Context) error {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	return nil
}

func (c *cluster) ready(context.Context) error {
	for _, s := range c.synced {
		if !s() {
			return errCachesNotSynced
		}
	}
	return nil
}

// pod returns the cached pod, if the cache has it.
func (c *cluster) pod(namespace, name string) (*corev1.Pod, bool) {
	o, ok, err := c.pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	p, ok := o.(*corev1.Pod)
	return p, ok
}

// podsOn returns the pods bound to a node.
func (c *cluster) podsOn(node string) []*corev1.Pod {
	return typedIndex[corev1.Pod](c.pods, indexByNode, node)
}

// podsNominatedTo returns the unbound pods nominated to a NodeClaim.
func (c *cluster) podsNominatedTo(claim string) []*corev1.Pod {
	return typedIndex[corev1.Pod](c.pods, indexByNomination, claim)
}

func (c *cluster) allNodes() []*corev1.Node {
	return typedList[corev1.Node](c.nodes)
}

// node returns the cached node, if the cache has it.
func (c *cluster) node(name string) (*corev1.Node, bool) {
	o, ok, err := c.nodes.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := o.(*corev1.Node)
	return n, ok
}

func (c *cluster) allDaemonSets() []*appsv1.DaemonSet {
	return typedList[appsv1.DaemonSet](c.daemonSets)
}

// claim looks a cached NodeClaim up for the nomination rule.
func (c *cluster) claim(name string) (podproj.Claim, bool) {
	nc, ok := clusterstate.Get[karpv1.NodeClaim](c.nodeClaims, name)
	if !ok {
		return podproj.Claim{}, false
	}
	return podproj.ClaimOf(nc), true
}

func typedList[T any](inf cache.SharedIndexInformer) []*T {
	var out []*T
	for _, o := range inf.GetStore().List() {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

func typedIndex[T any](inf cache.SharedIndexInformer, index, key string) []*T {
	objs, err := inf.GetIndexer().ByIndex(index, key)
	if err != nil {
		return nil
	}
	var out []*T
	for _, o := range objs {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}
