package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The shapes of Karpenter's scheduling benchmark, in equal shares by default: plain pods, a
// zone spread, a hostname spread, zone self-affinity and hostname anti-affinity.
const (
	Plain        = "plain"
	ZoneSpread   = "zone-spread"
	HostSpread   = "host-spread"
	ZoneAffinity = "zone-affinity"
	HostAnti     = "host-anti"
)

// Shapes are every shape, in the order the workload is made.
var Shapes = []string{Plain, ZoneSpread, HostSpread, ZoneAffinity, HostAnti}

// Mix is each shape's share of the pods.
type Mix map[string]int

// DefaultMix is Karpenter's benchmark: five equal groups.
var DefaultMix = Mix{Plain: 1, ZoneSpread: 1, HostSpread: 1, ZoneAffinity: 1, HostAnti: 1}

// ParseMix reads "plain=2,host-anti=1"; shapes not named get no pods.
func ParseMix(s string) (Mix, error) {
	m := Mix{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("mix %q: want shape=weight, e.g. plain=2,host-anti=1", part)
		}
		if !slices.Contains(Shapes, k) {
			return nil, fmt.Errorf("mix: unknown shape %q (shapes: %s)", k, strings.Join(Shapes, ", "))
		}
		m[k] = n
	}
	total := 0
	for _, n := range m {
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("mix %q gives no pods", s)
	}
	return m, nil
}

func (m Mix) String() string {
	var parts []string
	for _, s := range Shapes {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", s, m[s]))
		}
	}
	return strings.Join(parts, ",")
}

// sizes are the pod sizes each shape is split over, as Karpenter's benchmark draws from a few.
var sizes = []struct{ cpu, memory string }{{"250m", "256Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}}

// Pods are the workload for n pods: per shape and size a group (label app=<shape>-<size>), the
// counts spread so they add up to n exactly. They are bare pods the harness creates itself, all
// at once: a Deployment's pods come from the ReplicaSet controller in slow-start batches at its
// own client rate, which would be timed instead of Fleetwright.
func (m Mix) Pods(namespace string, n int) []*corev1.Pod {
	total := 0
	for _, w := range m {
		total += w
	}
	type group struct {
		shape string
		size  int
		n     int
	}
	var groups []group
	for _, shape := range Shapes {
		for i := range sizes {
			if m[shape] > 0 {
				groups = append(groups, group{shape: shape, size: i})
			}
		}
	}
	// Every group its share, rounded down; the rest one each to the first groups.
	given := 0
	for i := range groups {
		groups[i].n = n * m[groups[i].shape] / total / len(sizes)
		given += groups[i].n
	}
	for i := 0; given < n; i, given = (i+1)%len(groups), given+1 {
		groups[i].n++
	}
	out := make([]*corev1.Pod, 0, n)
	for _, g := range groups {
		for i := 0; i < g.n; i++ {
			out = append(out, pod(namespace, g.shape, g.size, i))
		}
	}
	return out
}

func pod(namespace, shape string, size, i int) *corev1.Pod {
	group := fmt.Sprintf("%s-%d", shape, size)
	labels := map[string]string{"app": group, ShapeLabel: shape}
	self := &metav1.LabelSelector{MatchLabels: map[string]string{"app": group}}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To(int64(0)),
		Containers: []corev1.Container{{Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(sizes[size].cpu), corev1.ResourceMemory: resource.MustParse(sizes[size].memory)}}}},
	}
	switch shape {
	case ZoneSpread, HostSpread:
		key := corev1.LabelTopologyZone
		if shape == HostSpread {
			key = corev1.LabelHostname
		}
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: self}}
	case ZoneAffinity:
		spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: corev1.LabelTopologyZone, LabelSelector: self}}}}
	case HostAnti:
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: corev1.LabelHostname, LabelSelector: self}}}}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", group, i), Namespace: namespace, Labels: labels}, Spec: spec}
}

// ShapeLabel names each pod's shape.
const ShapeLabel = "scale.fleetwright.io/shape"
