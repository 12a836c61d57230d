package clusterstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// The Karpenter resources, as the dynamic client names them.
var (
	NodePools     = karpv1.SchemeGroupVersion.WithResource("nodepools")
	NodeClaims    = karpv1.SchemeGroupVersion.WithResource("nodeclaims")
	NodeClasses   = ec2v1.SchemeGroupVersion.WithResource("ec2nodeclasses")
	Provisioners  = v1alpha5.SchemeGroupVersion.WithResource("provisioners")
	NodeTemplates = v1alpha1.SchemeGroupVersion.WithResource("awsnodetemplates")
)

// ErrNotSynced is what Ready reports until every informer has listed once.
var ErrNotSynced = errors.New("informer caches not synced yet")

// PodScope is which pods a cache holds.
type PodScope int

const (
	NoPods      PodScope = iota
	UnboundPods          // only pods without a node: the pending candidates (pod-watcher)
	AllPods
)

// Want names what a service reads; its cache holds that and nothing else.
type Want struct {
	Pods        PodScope
	Nodes       bool
	DaemonSets  bool // DaemonSets and the LimitRanges admission applies to their pods (DaemonSetPod)
	Volumes     bool // PersistentVolumeClaims, PersistentVolumes and StorageClasses, for podproj
	NodeClaims  bool
	Pools       bool // NodePools, and v1alpha5 Provisioners where that API is served
	NodeClasses bool // EC2NodeClasses, and v1alpha1 AWSNodeTemplates where that API is served
	PDBs        bool // PodDisruptionBudgets, for what disruption may evict
}

// Cache is the one way a service reads the cluster: client-go informers for the core types,
// dynamic informers for Karpenter's resources (typed once as they enter the cache), managed
// fields dropped, and readiness that says when all of them have listed. Informers a service did
// not ask for are nil.
type Cache struct {
	Pods, Nodes, DaemonSets, LimitRanges, PDBs                  cache.SharedIndexInformer
	NodeClaims, NodePools, NodeClasses, Provisioners, Templates cache.SharedIndexInformer
	Volumes                                                     podproj.Listers
	// Legacy is whether the v1alpha5 generation's CRDs are served (and so watched).
	Legacy bool

	log       zerolog.Logger
	factories []interface{ Start(<-chan struct{}) }
	synced    []cache.InformerSynced
	warned    sync.Map // what was logged, by subject, with the resource version it was about
	noms      nominationRecords
}

// Index names.
const (
	byNode     = "node"     // pods by spec.nodeName
	byOwner    = "owner"    // pods by their controller's UID
	byNominee  = "nominee"  // NodeClaims by the UIDs of the pods nominated to them
	byInstance = "instance" // NodeClaims by EC2 instance id
)

// New builds the informers; Start runs them.
func New(kube kubernetes.Interface, dyn dynamic.Interface, want Want, log zerolog.Logger) (*Cache, error) {
	c := &Cache{log: log}
	core := informers.NewSharedInformerFactory(kube, 0)
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c.factories = []interface{ Start(<-chan struct{}) }{core, df}
	var all []cache.SharedIndexInformer
	var errs []error
	add := func(inf cache.SharedIndexInformer, transform cache.TransformFunc) cache.SharedIndexInformer {
		errs = append(errs, inf.SetTransform(transform))
		all = append(all, inf)
		return inf
	}
	switch want.Pods {
	case UnboundPods:
		unbound := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
		c.factories = append(c.factories, unbound)
		c.Pods = add(unbound.Core().V1().Pods().Informer(), SlimPod)
	case AllPods:
		c.Pods = add(core.Core().V1().Pods().Informer(), SlimPod)
	}
	if c.Pods != nil {
		errs = append(errs, c.Pods.AddIndexers(cache.Indexers{byNode: podByNode, byOwner: podByOwner}))
	}
	if want.Nodes {
		c.Nodes = add(core.Core().V1().Nodes().Informer(), SlimNode)
	}
	if want.DaemonSets {
		c.DaemonSets = add(core.Apps().V1().DaemonSets().Informer(), StripManagedFields)
		c.LimitRanges = add(core.Core().V1().LimitRanges().Informer(), StripManagedFields)
	}
	if want.PDBs {
		c.PDBs = add(core.Policy().V1().PodDisruptionBudgets().Informer(), StripManagedFields)
	}
	if want.Volumes {
		claims, pvs, classes := core.Core().V1().PersistentVolumeClaims(), core.Core().V1().PersistentVolumes(), core.Storage().V1().StorageClasses()
		add(claims.Informer(), StripManagedFields)
		add(pvs.Informer(), StripManagedFields)
		add(classes.Informer(), StripManagedFields)
		c.Volumes = podproj.Listers{Claims: claims.Lister(), Volumes: pvs.Lister(), Classes: classes.Lister()}
	}
	if want.NodeClaims {
		c.NodeClaims = add(df.ForResource(NodeClaims).Informer(), Typed[karpv1.NodeClaim]())
		errs = append(errs, c.NodeClaims.AddIndexers(cache.Indexers{byInstance: claimByInstance, byNominee: claimByNominee}))
		_, err := c.NodeClaims.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if m, ok := o.(metav1.Object); ok {
				c.forgetRecords(m.GetName())
			}
		}})
		errs = append(errs, err)
	}
	// The v1alpha5 generation is optional, each of its kinds on its own: a kind whose CRD is
	// not installed has nothing to translate.
	legacy := func(gvr schema.GroupVersionResource) (bool, error) {
		ok, err := served(kube, gvr)
		c.Legacy = c.Legacy || ok
		return ok, err
	}
	if want.Pools {
		c.NodePools = add(df.ForResource(NodePools).Informer(), Typed[karpv1.NodePool]())
		if ok, err := legacy(Provisioners); err != nil {
			return nil, err
		} else if ok {
			c.Provisioners = add(df.ForResource(Provisioners).Informer(), Typed[v1alpha5.Provisioner]())
		}
	}
	if want.NodeClasses {
		if ok, err := legacy(NodeTemplates); err != nil {
			return nil, err
		} else if ok {
			c.Templates = add(df.ForResource(NodeTemplates).Informer(), Typed[v1alpha1.AWSNodeTemplate]())
		}
	}
	if want.NodeClasses {
		c.NodeClasses = add(df.ForResource(NodeClasses).Informer(), Typed[ec2v1.EC2NodeClass]())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("setting up informers: %w", err)
	}
	for _, inf := range all {
		c.synced = append(c.synced, inf.HasSynced)
	}
	return c, nil
}

// Start runs the informers and waits until each has listed once.
func (c *Cache) Start(ctx context.Context) error {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	return nil
}

// Ready is the readiness check: nil once every informer has listed.
func (c *Cache) Ready(context.Context) error {
	for _, s := range c.synced {
		if !s() {
			return ErrNotSynced
		}
	}
	return nil
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

// podByNode indexes a pod by its node; an unbound pod under "".
func podByNode(o any) ([]string, error) {
	if p, ok := o.(*corev1.Pod); ok {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// podByOwner indexes a pod by the UID of its controller, if it has one.
func podByOwner(o any) ([]string, error) {
	if p, ok := o.(*corev1.Pod); ok {
		if ref := metav1.GetControllerOf(p); ref != nil {
			return []string{string(ref.UID)}, nil
		}
	}
	return nil, nil
}

func claimByNominee(o any) ([]string, error) {
	if nc, ok := o.(*karpv1.NodeClaim); ok {
		return podproj.NominatedUIDs(nc.Annotations), nil
	}
	return nil, nil
}

func claimByInstance(o any) ([]string, error) {
	if nc, ok := o.(*karpv1.NodeClaim); ok {
		if id := ec2v1.InstanceID(nc.Status.ProviderID); id != "" {
			return []string{id}, nil
		}
	}
	return nil, nil
}

// Pod returns the cached pod.
func (c *Cache) Pod(namespace, name string) (*corev1.Pod, bool) {
	return Get[corev1.Pod](c.Pods, namespace+"/"+name)
}

// PodsOn returns the pods bound to a node.
func (c *Cache) PodsOn(node string) []*corev1.Pod {
	if node == "" {
		return nil
	}
	return byIndex[corev1.Pod](c.Pods, byNode, node)
}

// Unbound returns the pods bound to no node (pending ones among them).
func (c *Cache) Unbound() []*corev1.Pod { return byIndex[corev1.Pod](c.Pods, byNode, "") }

// PodsNominatedTo returns the cached unbound pods the NodeClaim records nominations of, whatever
// the state of each nomination (podproj.NominationRule judges that).
func (c *Cache) PodsNominatedTo(claim string) []*corev1.Pod {
	nc, ok := c.Claim(claim)
	if !ok {
		return nil
	}
	return c.NomineesOf(nc)
}

// NomineesOf returns the cached unbound pods the NodeClaim object records nominations of (a
// claim just deleted, as its delete event carries it, included).
func (c *Cache) NomineesOf(nc *karpv1.NodeClaim) []*corev1.Pod {
	var out []*corev1.Pod
	for _, n := range c.records(nc).sorted {
		ns, name, _ := strings.Cut(n.Pod, "/")
		if p, ok := c.Pod(ns, name); ok && string(p.UID) == n.UID && p.Spec.NodeName == "" {
			out = append(out, p)
		}
	}
	return out
}

// NominationOf returns the pod's latest nomination as the NodeClaims record it; the zero
// PodNomination if none does. A pod offered again after a nomination ended can be recorded on
// two claims: the later nomination is the one that counts.
func (c *Cache) NominationOf(uid string) podproj.PodNomination {
	var latest podproj.PodNomination
	for _, nc := range byIndex[karpv1.NodeClaim](c.NodeClaims, byNominee, uid) {
		if n, ok := c.records(nc).byUID[uid]; ok && (latest.Claim == "" || n.Supersedes(latest)) {
			latest = n
		}
	}
	return latest
}

// Node returns the cached node.
func (c *Cache) Node(name string) (*corev1.Node, bool) { return Get[corev1.Node](c.Nodes, name) }

// AllNodes returns every cached node.
func (c *Cache) AllNodes() []*corev1.Node { return List[corev1.Node](c.Nodes, nil) }

// AllPDBs lists the PodDisruptionBudgets.
func (c *Cache) AllPDBs() []*policyv1.PodDisruptionBudget {
	return List[policyv1.PodDisruptionBudget](c.PDBs, nil)
}

// AllDaemonSets returns every cached DaemonSet.
func (c *Cache) AllDaemonSets() []*appsv1.DaemonSet { return List[appsv1.DaemonSet](c.DaemonSets, nil) }

// Claim returns the cached NodeClaim.
func (c *Cache) Claim(name string) (*karpv1.NodeClaim, bool) {
	return Get[karpv1.NodeClaim](c.NodeClaims, name)
}

// Claims returns every cached NodeClaim that decodes; one that does not is logged.
func (c *Cache) Claims() []*karpv1.NodeClaim {
	return List[karpv1.NodeClaim](c.NodeClaims, c.undecodable("nodeclaim"))
}

// ClaimOfInstance returns the NodeClaim running an EC2 instance.
func (c *Cache) ClaimOfInstance(id string) (*karpv1.NodeClaim, bool) {
	claims := byIndex[karpv1.NodeClaim](c.NodeClaims, byInstance, id)
	if len(claims) == 0 {
		return nil, false
	}
	return claims[0], true
}

// NominationClaim looks a NodeClaim up for podproj.NominationRule.
func (c *Cache) NominationClaim(name string) (podproj.Claim, bool) {
	nc, ok := c.Claim(name)
	if !ok {
		return podproj.Claim{}, false
	}
	return podproj.ClaimOf(nc), true
}

func (c *Cache) undecodable(kind string) func(string, error) {
	return func(name string, err error) {
		c.once(kind+"/"+name+"/undecodable", err.Error(), func() {
			c.log.Warn().Err(err).Str(kind, name).Msgf("skipping %s that does not decode", kind)
		})
	}
}

// once runs log the first time it is called for subject with this version (of the object it is
// about), so a read model asked for every couple of seconds does not repeat a warning.
func (c *Cache) once(subject, version string, log func()) {
	if prev, loaded := c.warned.Swap(subject, version); !loaded || prev != version {
		log()
	}
}

func byIndex[T any](inf cache.SharedIndexInformer, index, key string) []*T {
	objs, err := inf.GetIndexer().ByIndex(index, key)
	if err != nil {
		return nil
	}
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

// OnChange calls changed after each add, update or delete the given informers (this cache's
// own: c.Nodes, c.NodeClaims, ...) deliver, once the cache holds the change. It is a nudge,
// not the object: a service reads what it needs from the cache. An update that changes nothing
// (the same resource version) is not passed on. changed runs on the informer's delivery
// goroutine, so it must not block: a service coalesces with a service.Trigger.
// An informer this cache does not hold (nil: not asked for in Want) is an error.
func (c *Cache) OnChange(changed func(), infs ...cache.SharedIndexInformer) error {
	if len(infs) == 0 {
		return errors.New("OnChange: no informer given")
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() },
		UpdateFunc: func(old, cur any) {
			o, oerr := meta.Accessor(old)
			n, nerr := meta.Accessor(cur)
			if oerr == nil && nerr == nil && o.GetResourceVersion() == n.GetResourceVersion() {
				return
			}
			changed()
		},
		DeleteFunc: func(any) { changed() },
	}
	for i, inf := range infs {
		if inf == nil {
			return fmt.Errorf("OnChange: informer %d is not held by this cache (ask for it in Want)", i)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("OnChange: adding an event handler: %w", err)
		}
	}
	return nil
}
