package podproj

import (
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// VolumeLookup resolves a pod's claims to the topology their volumes need. Informer listers
// satisfy it through a small adapter; nil means "no volume information".
type VolumeLookup interface {
	Claim(namespace, name string) (*corev1.PersistentVolumeClaim, bool)
	Volume(name string) (*corev1.PersistentVolume, bool)
	StorageClass(name string) (*storagev1.StorageClass, bool)
}

// Project builds the scheduling projection of a pod. Requests are what kube-scheduler
// reserves: the larger of the sum of app containers (plus sidecars) and the largest init
// container step, plus the pod overhead; cpu in millicores, everything else in base units.
func Project(p *corev1.Pod, vols VolumeLookup) *podsv1.PodProjection {
	out := &podsv1.PodProjection{
		Namespace:         p.Namespace,
		Name:              p.Name,
		Uid:               string(p.UID),
		CreationTime:      timestamppb.New(p.CreationTimestamp.Time),
		Labels:            copyMap(p.Labels),
		Requests:          &commonv1.Resources{Quantities: Requests(p)},
		NodeSelector:      copyMap(p.Spec.NodeSelector),
		Tolerations:       tolerations(p.Spec.Tolerations),
		PriorityClassName: p.Spec.PriorityClassName,
		HostPorts:         hostPorts(p),
	}
	if p.Spec.Priority != nil {
		out.Priority = *p.Spec.Priority
	}
	if o := controllerOf(p); o != nil {
		out.Owner = &podsv1.OwnerReference{ApiVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, Uid: string(o.UID), Controller: true}
	}
	if a := p.Spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil {
			if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				for _, t := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
					out.RequiredNodeAffinity = append(out.RequiredNodeAffinity, nodeSelectorTerm(t))
				}
			}
			for _, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				out.PreferredNodeAffinity = append(out.PreferredNodeAffinity, &podsv1.PreferredSchedulingTerm{Weight: t.Weight, Preference: nodeSelectorTerm(t.Preference)})
			}
		}
		if pa := a.PodAffinity; pa != nil {
			out.PodAffinity = podAffinity(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			out.PodAntiAffinity = podAffinity(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		tsc := &podsv1.TopologySpreadConstraint{
			MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, WhenUnsatisfiable: string(c.WhenUnsatisfiable),
			LabelSelector: labelSelector(c.LabelSelector), MatchLabelKeys: c.MatchLabelKeys,
		}
		if c.MinDomains != nil {
			tsc.MinDomains = c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			tsc.NodeAffinityPolicy = string(*c.NodeAffinityPolicy)
		}
		if c.NodeTaintsPolicy != nil {
			tsc.NodeTaintsPolicy = string(*c.NodeTaintsPolicy)
		}
		out.TopologySpreadConstraints = append(out.TopologySpreadConstraints, tsc)
	}
	if vols != nil {
		out.VolumeRequirements = volumeRequirements(p, vols)
	}
	return out
}

// Requests returns the pod's effective requests keyed by resource name, plus "pods": 1.
func Requests(p *corev1.Pod) map[string]int64 {
	list := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	out := make(map[string]int64, len(list)+1)
	for name, q := range list {
		if name == corev1.ResourceCPU {
			out[string(name)] = q.MilliValue()
		} else {
			out[string(name)] = q.Value()
		}
	}
	out[string(corev1.ResourcePods)] = 1
	return out
}

func controllerOf(p *corev1.Pod) *metav1.OwnerReference {
	for i := range p.OwnerReferences {
		if o := p.OwnerReferences[i]; o.Controller != nil && *o.Controller {
			return &p.OwnerReferences[i]
		}
	}
	return nil
}

func nodeSelectorTerm(t corev1.NodeSelectorTerm) *commonv1.NodeSelectorTerm {
	out := &commonv1.NodeSelectorTerm{}
	for _, r := range t.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, requirement(r))
	}
	for _, r := range t.MatchFields {
		out.MatchFields = append(out.MatchFields, requirement(r))
	}
	return out
}

func requirement(r corev1.NodeSelectorRequirement) *commonv1.NodeSelectorRequirement {
	return &commonv1.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: append([]string(nil), r.Values...)}
}

func podAffinity(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) *podsv1.PodAffinity {
	out := &podsv1.PodAffinity{}
	for _, t := range req {
		out.Required = append(out.Required, podAffinityTerm(t))
	}
	for _, w := range pref {
		out.Preferred = append(out.Preferred, &podsv1.WeightedPodAffinityTerm{Weight: w.Weight, Term: podAffinityTerm(w.PodAffinityTerm)})
	}
	return out
}

func podAffinityTerm(t corev1.PodAffinityTerm) *podsv1.PodAffinityTerm {
	return &podsv1.PodAffinityTerm{
		LabelSelector: labelSelector(t.LabelSelector), Namespaces: append([]string(nil), t.Namespaces...),
		NamespaceSelector: labelSelector(t.NamespaceSelector), TopologyKey: t.TopologyKey,
		MatchLabelKeys: t.MatchLabelKeys, MismatchLabelKeys: t.MismatchLabelKeys,
	}
}

func labelSelector(s *metav1.LabelSelector) *commonv1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &commonv1.LabelSelector{MatchLabels: copyMap(s.MatchLabels)}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, &commonv1.LabelSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: append([]string(nil), r.Values...)})
	}
	return out
}

func tolerations(ts []corev1.Toleration) []*commonv1.Toleration {
	var out []*commonv1.Toleration
	for _, t := range ts {
		out = append(out, &commonv1.Toleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect), TolerationSeconds: t.TolerationSeconds})
	}
	return out
}

func hostPorts(p *corev1.Pod) []*podsv1.HostPort {
	var out []*podsv1.HostPort
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort == 0 {
					continue
				}
				proto := string(port.Protocol)
				if proto == "" {
					proto = string(corev1.ProtocolTCP)
				}
				out = append(out, &podsv1.HostPort{Port: port.HostPort, Protocol: proto, HostIp: port.HostIP})
			}
		}
	}
	return out
}

// volumeRequirements resolves each claim: a bound volume's node affinity, or for an unbound
// claim the allowed topologies of its storage class.
func volumeRequirements(p *corev1.Pod, vols VolumeLookup) []*podsv1.VolumeRequirement {
	var out []*podsv1.VolumeRequirement
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		claim, ok := vols.Claim(p.Namespace, v.PersistentVolumeClaim.ClaimName)
		if !ok {
			continue
		}
		vr := &podsv1.VolumeRequirement{VolumeName: v.Name, ClaimName: claim.Name}
		if claim.Spec.VolumeName != "" {
			pv, ok := vols.Volume(claim.Spec.VolumeName)
			if !ok || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
				continue
			}
			vr.Source = fmt.Sprintf("persistentvolume/%s", pv.Name)
			for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
				for _, r := range t.MatchExpressions {
					vr.Requirements = append(vr.Requirements, requirement(r))
				}
			}
		} else if sc := claim.Spec.StorageClassName; sc != nil {
			class, ok := vols.StorageClass(*sc)
			if !ok {
				continue
			}
			vr.Source = fmt.Sprintf("storageclass/%s", class.Name)
			for _, t := range class.AllowedTopologies {
				for _, e := range t.MatchLabelExpressions {
					vr.Requirements = append(vr.Requirements, &commonv1.NodeSelectorRequirement{Key: e.Key, Operator: string(corev1.NodeSelectorOpIn), Values: append([]string(nil), e.Values...)})
				}
			}
		}
		if len(vr.Requirements) > 0 {
			out = append(out, vr)
		}
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
