package podproj

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Admission changes a pod between the template it comes from and the object that lands: the API
// server's defaulting gives a container without a request the request of its limit, and the
// LimitRanger admission plugin fills in, from its namespace's LimitRanges, the default limits and
// requests a container does not state. A node sized from a template that admission later grows
// is too small for what lands on it (a DaemonSet whose pods take the room planned for the pod
// the node was launched for). Admitted applies both to a pod that has not been admitted yet: a
// DaemonSet's template, read before any of its pods exist.

// Admitted returns a copy of the pod as the API server would admit it in a namespace with these
// LimitRanges (others' are ignored): requests defaulted from limits, then each LimitRange's
// container defaults, in name order, filling only what the container leaves unset.
func Admitted(pod *corev1.Pod, ranges []*corev1.LimitRange) *corev1.Pod {
	out := pod.DeepCopy()
	for _, cs := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			requestsFromLimits(&cs[i].Resources)
		}
	}
	ranges = slices.Clone(ranges)
	slices.SortFunc(ranges, func(a, b *corev1.LimitRange) int { return strings.Compare(a.Name, b.Name) })
	for _, lr := range ranges {
		if lr.Namespace != pod.Namespace {
			continue
		}
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			limits, requests := containerDefaults(item)
			for _, cs := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
				for i := range cs {
					fillUnset(&cs[i].Resources.Limits, limits)
					fillUnset(&cs[i].Resources.Requests, requests)
				}
			}
		}
	}
	return out
}

// requestsFromLimits is the API server's pod defaulting: a resource with a limit and no request
// is requested at its limit.
func requestsFromLimits(r *corev1.ResourceRequirements) {
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q.DeepCopy()
		}
	}
}

// containerDefaults are a Container LimitRange item's default limits and requests, completed as
// the API server completes a LimitRange it stores: a missing default limit is the max, a missing
// default request the default limit, else the min.
func containerDefaults(item corev1.LimitRangeItem) (limits, requests corev1.ResourceList) {
	limits, requests = corev1.ResourceList{}, corev1.ResourceList{}
	for name, q := range item.Default {
		limits[name] = q.DeepCopy()
	}
	for name, q := range item.Max {
		if _, ok := limits[name]; !ok {
			limits[name] = q.DeepCopy()
		}
	}
	for name, q := range item.DefaultRequest {
		requests[name] = q.DeepCopy()
	}
	for _, from := range []corev1.ResourceList{limits, item.Min} {
		for name, q := range from {
			if _, ok := requests[name]; !ok {
				requests[name] = q.DeepCopy()
			}
		}
	}
	return limits, requests
}

// fillUnset sets each default the list does not hold.
func fillUnset(list *corev1.ResourceList, defaults corev1.ResourceList) {
	for name, q := range defaults {
		if _, ok := (*list)[name]; ok {
			continue
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q.DeepCopy()
	}
}

// RaiseTo raises the pod's container requests to those of landed, a pod admitted from the same
// template, and adds the containers admission added (sidecars): the larger of what the template
// says and what landed, resource by resource.
func RaiseTo(pod, landed *corev1.Pod) {
	pod.Spec.InitContainers = raiseContainers(pod.Spec.InitContainers, landed.Spec.InitContainers)
	pod.Spec.Containers = raiseContainers(pod.Spec.Containers, landed.Spec.Containers)
	if len(pod.Spec.Overhead) == 0 && len(landed.Spec.Overhead) > 0 {
		pod.Spec.Overhead = landed.Spec.Overhead.DeepCopy()
	}
}

func raiseContainers(mine, landed []corev1.Container) []corev1.Container {
	for _, lc := range landed {
		i := slices.IndexFunc(mine, func(c corev1.Container) bool { return c.Name == lc.Name })
		if i < 0 {
			mine = append(mine, *lc.DeepCopy())
			continue
		}
		for name, q := range lc.Resources.Requests {
			if cur, ok := mine[i].Resources.Requests[name]; !ok || q.Cmp(cur) > 0 {
				if mine[i].Resources.Requests == nil {
					mine[i].Resources.Requests = corev1.ResourceList{}
				}
				mine[i].Resources.Requests[name] = q.DeepCopy()
			}
		}
	}
	return mine
}
