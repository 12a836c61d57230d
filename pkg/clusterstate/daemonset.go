package clusterstate

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// The annotation on a DaemonSet and the label on its pods that name the generation of its pod
// template (set by the API server and the DaemonSet controller).
const (
	dsTemplateGeneration  = "deprecated.daemonset.template.generation"
	podTemplateGeneration = "pod-template-generation"
)

// DaemonSetPod is the pod a DaemonSet will run on a new node, for its overhead: its template as
// admission would leave it — requests defaulted from limits, the namespace's LimitRange defaults
// (podproj.Admitted) — raised to what its newest pod of the same template asked for, so what an
// admission webhook or a sidecar injector adds that the template does not show is counted too
// (Karpenter reads the DaemonSet's newest pod alone; a LimitRange made after that pod would then
// be missed). The template's node affinity is kept: the DaemonSet controller pins each pod it
// makes to its node, which says nothing about new nodes.
func (c *Cache) DaemonSetPod(ds *appsv1.DaemonSet) *corev1.Pod {
	tmpl := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
	tmpl.Namespace, tmpl.Name = ds.Namespace, ds.Name
	pod := podproj.Admitted(tmpl, c.LimitRangesIn(ds.Namespace))
	if landed := c.newestPodOf(ds); landed != nil {
		podproj.RaiseTo(pod, landed)
	}
	return pod
}

// LimitRangesIn returns the namespace's LimitRanges (none if this cache holds none).
func (c *Cache) LimitRangesIn(namespace string) []*corev1.LimitRange {
	if c.LimitRanges == nil {
		return nil
	}
	var out []*corev1.LimitRange
	for _, lr := range List[corev1.LimitRange](c.LimitRanges, nil) {
		if lr.Namespace == namespace {
			out = append(out, lr)
		}
	}
	return out
}

// newestPodOf returns the DaemonSet's most recently created pod of its current template that is
// not on its way out, if the cache holds pods.
func (c *Cache) newestPodOf(ds *appsv1.DaemonSet) *corev1.Pod {
	if c.Pods == nil {
		return nil
	}
	gen := ds.Annotations[dsTemplateGeneration]
	var newest *corev1.Pod
	for _, p := range byIndex[corev1.Pod](c.Pods, byOwner, string(ds.UID)) {
		if p.DeletionTimestamp != nil || p.Namespace != ds.Namespace {
			continue
		}
		if g, ok := p.Labels[podTemplateGeneration]; ok && gen != "" && g != gen {
			continue
		}
		if newest == nil || p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	return newest
}
