package podproj

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func limitRange(ns, name string, item corev1.LimitRangeItem) *corev1.LimitRange {
	if item.Type == "" {
		item.Type = corev1.LimitTypeContainer
	}
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}
}

func TestAdmitted(t *testing.T) {
	// Karpenter's regression suite's DaemonSet: only a memory limit.
	memLimitOnly := corev1.ResourceRequirements{Limits: rl("memory", "1Gi")}
	tests := []struct {
		name      string
		resources corev1.ResourceRequirements
		ranges    []*corev1.LimitRange
		want      map[string]int64 // Requests of the admitted pod
	}{
		{"no limit range: requests default to limits", memLimitOnly, nil,
			map[string]int64{"memory": 1 << 30, "pods": 1}},
		{"LimitRange default: limits and requests filled", memLimitOnly,
			[]*corev1.LimitRange{limitRange("default", "lr", corev1.LimitRangeItem{Default: rl("cpu", "2", "memory", "1Gi")})},
			map[string]int64{"cpu": 2000, "memory": 1 << 30, "pods": 1}},
		{"LimitRange defaultRequest", memLimitOnly,
			[]*corev1.LimitRange{limitRange("default", "lr", corev1.LimitRangeItem{DefaultRequest: rl("cpu", "2", "memory", "2Gi")})},
			map[string]int64{"cpu": 2000, "memory": 1 << 30, "pods": 1}},
		{"max gives the default limit, so the request", corev1.ResourceRequirements{},
			[]*corev1.LimitRange{limitRange("default", "lr", corev1.LimitRangeItem{Max: rl("cpu", "3")})},
			map[string]int64{"cpu": 3000, "pods": 1}},
		{"min gives the default request", corev1.ResourceRequirements{},
			[]*corev1.LimitRange{limitRange("default", "lr", corev1.LimitRangeItem{Min: rl("memory", "256Mi")})},
			map[string]int64{"memory": 256 << 20, "pods": 1}},
		{"a stated request is kept", corev1.ResourceRequirements{Requests: rl("cpu", "100m")},
			[]*corev1.LimitRange{limitRange("default", "lr", corev1.LimitRangeItem{Default: rl("cpu", "2")})},
			map[string]int64{"cpu": 100, "pods": 1}},
		{"a stated limit is the request, not the range's default", corev1.ResourceRequirements{Limits: rl("cpu", "500m")},
			[]*corev1.LimitRange{limitRange("default", "lr", corev1.LimitRangeItem{Default: rl("cpu", "2")})},
			map[string]int64{"cpu": 500, "pods": 1}},
		{"another namespace's range and pod ranges do not apply", corev1.ResourceRequirements{},
			[]*corev1.LimitRange{limitRange("other", "lr", corev1.LimitRangeItem{Default: rl("cpu", "2")}),
				limitRange("default", "pods", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "4")})},
			map[string]int64{"pods": 1}},
		{"the first range by name fills a resource first", corev1.ResourceRequirements{},
			[]*corev1.LimitRange{limitRange("default", "b", corev1.LimitRangeItem{DefaultRequest: rl("cpu", "3")}),
				limitRange("default", "a", corev1.LimitRangeItem{DefaultRequest: rl("cpu", "1")})},
			map[string]int64{"cpu": 1000, "pods": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: tt.resources}}}}
			before := pod.DeepCopy()
			got := Admitted(pod, tt.ranges)
			assert.Equal(t, tt.want, Requests(got))
			assert.Equal(t, before, pod, "the pod given is not changed")
		})
	}
}

func TestAdmittedInitContainers(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}}, Containers: []corev1.Container{{Name: "c"}}}}
	got := Admitted(pod, []*corev1.LimitRange{limitRange("default", "lr", corev1.LimitRangeItem{DefaultRequest: rl("cpu", "2")})})
	assert.Equal(t, "2", got.Spec.InitContainers[0].Resources.Requests.Cpu().String())
	assert.Equal(t, "2", got.Spec.Containers[0].Resources.Requests.Cpu().String())
}
