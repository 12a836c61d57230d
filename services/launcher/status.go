package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	ec2v1alpha1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// statuses keeps what `kubectl get ec2nodeclasses,nodepools` shows true: what each EC2NodeClass
// resolves to in EC2 now (subnets, security groups, AMIs) and whether it is Ready, and each
// NodePool's nodes, their capacity, and whether its node class is Ready. The launcher owns these
// facts: it resolves node classes to launch, and records every claim's capacity.
type statuses struct {
	l       *launcher
	cache   *clusterstate.Cache
	classes dynamic.NamespaceableResourceInterface
	pools   dynamic.NamespaceableResourceInterface
}

// pass writes every status that changed; a write that conflicts waits for the next pass.
func (s *statuses) pass(ctx context.Context) error {
	var errs []error
	ready := map[string]string{} // class name → why it is not ready ("" if it is)
	for _, nc := range clusterstate.List[ec2v1.EC2NodeClass](s.cache.NodeClasses, nil) {
		next := nc.DeepCopy()
		ready[nc.Name] = s.resolve(ctx, next)
		if !equality.Semantic.DeepEqual(nc.Status, next.Status) {
			errs = append(errs, writeStatus(ctx, s.classes, next))
		}
		errs = append(errs, writeHash(ctx, s.classes, nc.Name, nc.Annotations,
			ec2v1.AnnotationEC2NodeClassHash, nc.Hash(), ec2v1.AnnotationEC2NodeClassHashVersion, ec2v1.EC2NodeClassHashVersion))
	}
	launched := s.launchedByPool()
	pools := clusterstate.List[karpv1.NodePool](s.cache.NodePools, nil)
	s.l.metrics.fleet.observe(pools, launched, s.cache.Claims(), catalogPrice(s.l.types.Lookup))
	if cat, version, err := s.l.types.Catalog(); err == nil {
		s.l.metrics.karp.observeCatalog(cat, version)
	}
	for _, np := range pools {
		next := np.DeepCopy()
		poolStatus(next, launched[np.Name], ready)
		if !equality.Semantic.DeepEqual(np.Status, next.Status) {
			errs = append(errs, writeStatus(ctx, s.pools, next))
		}
		errs = append(errs, writeHash(ctx, s.pools, np.Name, np.Annotations,
			karpv1.NodePoolHashAnnotationKey, np.Hash(), karpv1.NodePoolHashVersionAnnotationKey, karpv1.NodePoolHashVersion))
	}
	return errors.Join(errs...)
}

// resolve fills in what the class's selector terms find and the instance profile it launches
// with (made for its role if need be), with a condition per kind and Ready; it returns why the
// class is not ready, or "".
func (s *statuses) resolve(ctx context.Context, nc *ec2v1.EC2NodeClass) string {
	spec := specOf(nc)
	var why []string
	set := func(kind string, err error, found int, what string) {
		c := metav1.Condition{Type: kind, Status: metav1.ConditionTrue, Reason: "Resolved", Message: fmt.Sprintf("%d %s", found, what)}
		switch {
		case err != nil:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, "ResolutionFailed", err.Error()
		case found == 0:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NotFound", "no "+what+" match the selector terms"
		}
		if c.Status == metav1.ConditionFalse {
			why = append(why, kind+": "+c.Message)
		}
		nc.SetCondition(c)
	}
	subnets, err := s.l.resolver.subnets(ctx, spec.Subnets)
	nc.Status.Subnets = nil
	for _, sn := range subnets {
		nc.Status.Subnets = append(nc.Status.Subnets, ec2v1.Subnet{ID: sn.ID, Zone: sn.Zone, ZoneID: sn.ZoneID})
	}
	set(ec2v1.ConditionTypeSubnetsReady, err, len(subnets), "subnets")
	groups, err := s.l.resolver.securityGroups(ctx, spec.SecurityGroups)
	nc.Status.SecurityGroups = nil
	for _, id := range groups {
		nc.Status.SecurityGroups = append(nc.Status.SecurityGroups, ec2v1.SecurityGroup{ID: id})
	}
	set(ec2v1.ConditionTypeSecurityGroupsReady, err, len(groups), "security groups")
	images, err := s.l.resolver.images(ctx, spec.AMIs, s.l.k8sMinor)
	nc.Status.AMIs = nil
	for _, img := range images {
		nc.Status.AMIs = append(nc.Status.AMIs, ec2v1.AMI{ID: img.ID, Name: img.Name, Deprecated: img.Deprecated, Requirements: img.requirements()})
	}
	sort.SliceStable(nc.Status.AMIs, func(i, j int) bool { return nc.Status.AMIs[i].ID < nc.Status.AMIs[j].ID })
	set(ec2v1.ConditionTypeAMIsReady, err, len(images), "AMIs")
	profile, err := s.l.profiles.resolve(ctx, spec)
	nc.Status.InstanceProfile = profile
	c := metav1.Condition{Type: ec2v1.ConditionTypeInstanceProfileReady, Status: metav1.ConditionTrue, Reason: "Resolved", Message: "instance profile " + profile}
	if spec.Role != "" {
		c.Message += " holds role " + spec.Role
	}
	switch {
	case errors.Is(err, errNoSuchProfile):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NotFound", err.Error()
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "ResolutionFailed", err.Error()
	}
	if c.Status == metav1.ConditionFalse {
		why = append(why, c.Type+": "+c.Message)
	}
	nc.SetCondition(c)
	ready := metav1.Condition{Type: ec2v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready",
		Message: "subnets, security groups, AMIs and instance profile resolved"}
	if len(why) > 0 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "NotReady", fmt.Sprint(why)
	}
	nc.SetCondition(ready)
	if len(why) > 0 {
		return ready.Message
	}
	return ""
}

// launchedByPool sums, per pool, the capacity of its launched claims, with their count as
// "nodes" (as Karpenter reports it), in one pass over the claims.
func (s *statuses) launchedByPool() map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for _, nc := range s.cache.Claims() {
		pool := nc.Labels[karpv1.NodePoolLabelKey]
		if pool == "" || nc.Status.ProviderID == "" {
			continue
		}
		total := out[pool]
		if total == nil {
			total = corev1.ResourceList{}
			out[pool] = total
		}
		for name, q := range nc.Status.Capacity {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
		nodes := total[nodesResource]
		nodes.Add(*resource.NewQuantity(1, resource.DecimalSI))
		total[nodesResource] = nodes
	}
	return out
}

const nodesResource = corev1.ResourceName("nodes")

// poolStatus records the pool's launched capacity and whether its node class is Ready.
func poolStatus(np *karpv1.NodePool, launched corev1.ResourceList, classes map[string]string) {
	if launched == nil {
		launched = corev1.ResourceList{nodesResource: *resource.NewQuantity(0, resource.DecimalSI)}
	}
	np.Status.Resources = launched
	c := metav1.Condition{Type: karpv1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "node class is ready",
		ObservedGeneration: np.Generation}
	class := ""
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
		class = ref.Name
	}
	switch why, ok := classes[class]; {
	case !ok:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NodeClassNotFound", fmt.Sprintf("no EC2NodeClass named %q", class)
	case why != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NodeClassNotReady", fmt.Sprintf("EC2NodeClass %s: %s", class, why)
	}
	meta.SetStatusCondition(&np.Status.Conditions, c)
	c.Type = "Ready"
	meta.SetStatusCondition(&np.Status.Conditions, c)
}

// writeStatus writes an object's status as the cache had it, plus the change: a conflict (it
// changed since) is left for the next pass, which reads it anew.
func writeStatus(ctx context.Context, api dynamic.NamespaceableResourceInterface, obj runtime.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	if _, err = api.UpdateStatus(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{}); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// writeHash annotates a NodePool or EC2NodeClass with its hash and hash version, as Karpenter
// does, when they are not what it has: `kubectl get -o yaml` shows the hash its NodeClaims are
// compared with. A merge patch of the two annotations only: it cannot undo anyone's other
// change, and replicas that race write the same thing.
func writeHash(ctx context.Context, api dynamic.NamespaceableResourceInterface, name string, have map[string]string,
	hashKey, hash, versionKey, version string) error {
	if hash == "" || have[hashKey] == hash && have[versionKey] == version {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{hashKey: hash, versionKey: version}}})
	if err != nil {
		return err
	}
	if _, err := api.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotating %s with its hash: %w", name, err)
	}
	return nil
}

// classNames are the node classes that exist, of both generations.
func (s *statuses) classNames() map[string]bool {
	out := map[string]bool{}
	for _, nc := range clusterstate.List[ec2v1.EC2NodeClass](s.cache.NodeClasses, nil) {
		out[nc.Name] = true
	}
	for _, t := range clusterstate.List[ec2v1alpha1.AWSNodeTemplate](s.cache.Templates, nil) {
		out[t.Name] = true
	}
	return out
}
