package podproj

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func unschedulablePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		}}},
	}
}

func TestPending(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   bool
		reason string
	}{
		{"unschedulable", func(*corev1.Pod) {}, true, ""},
		{"bound", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, false, "bound to a node"},
		{"deleting", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }, false, "being deleted"},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false, "terminal"},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false, "terminal"},
		{"preempting", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n2" }, false, "preempting on n2"},
		{"daemonset", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
		}, false, "DaemonSet, static or mirror pod"},
		{"static", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "n", Controller: ptr.To(true)}}
		}, false, "DaemonSet, static or mirror pod"},
		{"mirror", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}, false, "DaemonSet, static or mirror pod"},
		{"not yet tried", func(p *corev1.Pod) { p.Status.Conditions = nil }, false, "not marked unschedulable by kube-scheduler"},
		{"scheduling gated", func(p *corev1.Pod) { p.Status.Conditions[0].Reason = "SchedulingGated" }, false, "not marked unschedulable by kube-scheduler"},
		{"replicaset owned", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}
		}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := unschedulablePod()
			tt.mutate(p)
			got, reason := Pending(p)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.reason, reason)
		})
	}
}

func req(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
}

func TestRequestsFollowKubeScheduler(t *testing.T) {
	p := unschedulablePod()
	p.Spec.Containers = []corev1.Container{{Name: "a", Resources: req("500m", "1Gi")}, {Name: "b", Resources: req("250m", "256Mi")}}
	p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("2")
	// An init step larger than the app containers in memory, smaller in CPU.
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: req("100m", "3Gi")}}
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("125m")}
	got := Requests(p)
	assert.Equal(t, int64(875), got["cpu"], "750m app containers + 125m overhead")
	assert.Equal(t, int64(3<<30), got["memory"], "the init container's 3Gi dominates")
	assert.Equal(t, int64(2), got["nvidia.com/gpu"])
	assert.Equal(t, int64(1), got["pods"])

	// A sidecar (restartable init container) runs beside the app containers: it adds up.
	p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: req("100m", "64Mi")}}
	got = Requests(p)
	assert.Equal(t, int64(975), got["cpu"])
	assert.Equal(t, int64(1<<30+256<<20+64<<20), got["memory"])
}

type volumes struct {
	claims  map[string]*corev1.PersistentVolumeClaim
	pvs     map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
}

func (v volumes) Claim(ns, name string) (*corev1.PersistentVolumeClaim, bool) {
	c, ok := v.claims[ns+"/"+name]
	return c, ok
}
func (v volumes) Volume(name string) (*corev1.PersistentVolume, bool) {
	p, ok := v.pvs[name]
	return p, ok
}
func (v volumes) StorageClass(name string) (*storagev1.StorageClass, bool) {
	c, ok := v.classes[name]
	return c, ok
}

func TestProjectCopiesConstraintsAndResolvesVolumeZones(t *testing.T) {
	p := unschedulablePod()
	p.Labels = map[string]string{"app": "web"}
	p.Spec.Priority = ptr.To[int32](100)
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/arch": "arm64"}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "example.com/special-taint", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	p.Spec.Affinity = &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}}}},
		}}},
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: "kubernetes.io/hostname",
		}}},
	}
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MinDomains: ptr.To[int32](3)}}
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Controller: ptr.To(true)}}
	p.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "bound"}}},
		{Name: "new", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "unbound"}}},
	}
	zoneReq := func(z string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{z}}
	}
	vols := volumes{
		claims: map[string]*corev1.PersistentVolumeClaim{
			"ns/bound":   {ObjectMeta: metav1.ObjectMeta{Name: "bound"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}},
			"ns/unbound": {ObjectMeta: metav1.ObjectMeta{Name: "unbound"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("gp3")}},
		},
		pvs: map[string]*corev1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{zoneReq("us-east-1b")}}}}},
		}}},
		classes: map[string]*storagev1.StorageClass{"gp3": {ObjectMeta: metav1.ObjectMeta{Name: "gp3"},
			AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "topology.kubernetes.io/zone", Values: []string{"us-east-1b", "us-east-1c"}}}}}}},
	}

	got := Project(p, vols)
	assert.Equal(t, "ns", got.Namespace)
	assert.Equal(t, "u1", got.Uid)
	assert.Equal(t, int32(100), got.Priority)
	assert.Empty(t, got.NominatedNodeClaimName, "pod-watcher sets the nomination it judged ended")
	assert.Equal(t, map[string]string{"kubernetes.io/arch": "arm64"}, got.NodeSelector)
	require.Len(t, got.RequiredNodeAffinity, 2, "ORed terms stay separate")
	assert.Equal(t, "spot", got.RequiredNodeAffinity[0].MatchExpressions[0].Values[0])
	require.Len(t, got.PodAntiAffinity.Required, 1)
	assert.Equal(t, "kubernetes.io/hostname", got.PodAntiAffinity.Required[0].TopologyKey)
	require.Len(t, got.TopologySpreadConstraints, 1)
	assert.Equal(t, int32(3), got.TopologySpreadConstraints[0].GetMinDomains())
	assert.Equal(t, "DoNotSchedule", got.TopologySpreadConstraints[0].WhenUnsatisfiable)
	require.Len(t, got.Tolerations, 1)
	assert.Equal(t, "Exists", got.Tolerations[0].Operator)
	require.Len(t, got.HostPorts, 1)
	assert.Equal(t, int32(8080), got.HostPorts[0].Port)
	assert.Equal(t, "TCP", got.HostPorts[0].Protocol)
	assert.Equal(t, "ReplicaSet", got.Owner.Kind)
	require.Len(t, got.VolumeRequirements, 2)
	assert.Equal(t, "persistentvolume/pv-1", got.VolumeRequirements[0].Source)
	assert.Equal(t, []string{"us-east-1b"}, got.VolumeRequirements[0].Requirements[0].Values)
	assert.Equal(t, "storageclass/gp3", got.VolumeRequirements[1].Source)
	assert.Equal(t, []string{"us-east-1b", "us-east-1c"}, got.VolumeRequirements[1].Requirements[0].Values)
}
