package translate

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
)

// KubeletAnnotationKey carries a translated Provisioner's kubelet settings (as JSON of an
// EC2NodeClass kubelet) on its NodePool, the way Karpenter's own v1 conversion keeps them,
// since v1 holds kubelet settings on the EC2NodeClass.
const KubeletAnnotationKey = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"

// DefaultBudget is the disruption budget a translated NodePool gets: v1's default.
var DefaultBudget = karpv1.Budget{Nodes: "10%"}

// NodePool translates a Provisioner into the NodePool that behaves as it did.
func NodePool(p *v1alpha5.Provisioner) (*karpv1.NodePool, error) {
	ref, err := nodeClassRef(p)
	if err != nil {
		return nil, fmt.Errorf("translating provisioner %s: %w", p.Name, err)
	}
	disruption, err := disruption(p.Spec)
	if err != nil {
		return nil, fmt.Errorf("translating provisioner %s: %w", p.Name, err)
	}
	np := &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: maps.Clone(p.Labels)},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				ObjectMeta: templateMeta(p),
				Spec: karpv1.NodeClaimTemplateSpec{
					Taints:        cloneTaints(p.Spec.Taints),
					StartupTaints: cloneTaints(p.Spec.StartupTaints),
					Requirements:  withDefaults(requirements(p.Spec.Requirements)),
					NodeClassRef:  ref,
					ExpireAfter:   secondsOrNever(p.Spec.TTLSecondsUntilExpired),
				},
			},
			Disruption: disruption,
			Weight:     clonePtr(p.Spec.Weight),
		},
	}
	if p.Spec.Limits != nil && len(p.Spec.Limits.Resources) > 0 {
		np.Spec.Limits = karpv1.Limits(p.Spec.Limits.Resources.DeepCopy())
	}
	if k := Kubelet(p.Spec.KubeletConfiguration); k != nil {
		b, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("translating provisioner %s: encoding kubelet: %w", p.Name, err)
		}
		np.Annotations = map[string]string{KubeletAnnotationKey: string(b)}
	}
	return np, nil
}

// nodeClassRef points at the EC2NodeClass translated from the Provisioner's AWSNodeTemplate
// (same name), or from its inline provider (named after the Provisioner).
func nodeClassRef(p *v1alpha5.Provisioner) (*karpv1.NodeClassReference, error) {
	ref := &karpv1.NodeClassReference{Group: ec2v1.Group, Kind: "EC2NodeClass"}
	switch {
	case p.Spec.ProviderRef != nil && p.Spec.Provider != nil:
		return nil, fmt.Errorf("provider and providerRef are mutually exclusive")
	case p.Spec.ProviderRef != nil:
		if k := p.Spec.ProviderRef.Kind; k != "" && k != "AWSNodeTemplate" {
			return nil, fmt.Errorf("providerRef kind %q: only AWSNodeTemplate is supported", k)
		}
		if p.Spec.ProviderRef.Name == "" {
			return nil, fmt.Errorf("providerRef has no name")
		}
		ref.Name = p.Spec.ProviderRef.Name
	case p.Spec.Provider != nil:
		ref.Name = p.Name
	default:
		return nil, fmt.Errorf("neither providerRef nor provider is set")
	}
	return ref, nil
}

// templateMeta is the Provisioner's node labels, plus the provisioner-name label its nodes
// always carried, and its node annotations.
func templateMeta(p *v1alpha5.Provisioner) karpv1.TemplateMeta {
	labels := maps.Clone(p.Spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha5.ProvisionerNameLabelKey] = p.Name
	return karpv1.TemplateMeta{Labels: labels, Annotations: maps.Clone(p.Spec.Annotations)}
}

// disruption maps the emptiness TTL and consolidation switch onto a consolidation policy.
func disruption(s v1alpha5.ProvisionerSpec) (karpv1.Disruption, error) {
	consolidate := s.Consolidation != nil && s.Consolidation.Enabled != nil && *s.Consolidation.Enabled
	d := karpv1.Disruption{Budgets: []karpv1.Budget{DefaultBudget}}
	switch {
	case consolidate && s.TTLSecondsAfterEmpty != nil:
		return d, fmt.Errorf("ttlSecondsAfterEmpty and consolidation.enabled are mutually exclusive")
	case consolidate:
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		d.ConsolidateAfter = karpv1.DurationOf(0)
	case s.TTLSecondsAfterEmpty != nil:
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		d.ConsolidateAfter = secondsOrNever(s.TTLSecondsAfterEmpty)
	default:
		// v1alpha5 without either left nodes alone.
		d.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		d.ConsolidateAfter = karpv1.NillableDuration{}
	}
	return d, nil
}

func requirements(in []v1alpha5.NodeSelectorRequirement) []karpv1.NodeSelectorRequirementWithMinValues {
	out := make([]karpv1.NodeSelectorRequirementWithMinValues, 0, len(in))
	for _, r := range in {
		out = append(out, karpv1.NodeSelectorRequirementWithMinValues{
			Key: r.Key, Operator: r.Operator, Values: append([]string(nil), r.Values...),
		})
	}
	return out
}

// withDefaults adds what Karpenter's v1alpha5 admission webhook added to a Provisioner that
// said nothing about a key: on-demand, amd64, linux and, unless the Provisioner picks instance
// types some other way, categories c, m and r of a generation above 2. A Provisioner applied
// while Karpenter ran carries them already; one applied here gets them the same. v1 NodePools
// get no defaults (Karpenter v1 applies none).
func withDefaults(in []karpv1.NodeSelectorRequirementWithMinValues) []karpv1.NodeSelectorRequirementWithMinValues {
	named := map[string]bool{}
	for _, r := range in {
		named[r.Key] = true
	}
	add := func(key string, op corev1.NodeSelectorOperator, values ...string) {
		if !named[key] {
			in = append(in, karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
		}
	}
	add(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand)
	add(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")
	add(corev1.LabelOSStable, corev1.NodeSelectorOpIn, string(corev1.Linux))
	if !named[corev1.LabelInstanceTypeStable] && !named[ec2v1.LabelInstanceFamily] &&
		!named[ec2v1.LabelInstanceCategory] && !named[ec2v1.LabelInstanceGeneration] {
		add(ec2v1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r")
		add(ec2v1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "2")
	}
	return in
}

// Kubelet translates v1alpha5 kubelet settings into the EC2NodeClass's; nil for nil.
// containerRuntime has no v1 equivalent (containerd is the only runtime) and is dropped.
func Kubelet(k *v1alpha5.KubeletConfiguration) *ec2v1.KubeletConfiguration {
	if k == nil {
		return nil
	}
	return &ec2v1.KubeletConfiguration{
		ClusterDNS:                  append([]string(nil), k.ClusterDNS...),
		MaxPods:                     clonePtr(k.MaxPods),
		PodsPerCore:                 clonePtr(k.PodsPerCore),
		SystemReserved:              resourceStrings(k.SystemReserved),
		KubeReserved:                resourceStrings(k.KubeReserved),
		EvictionHard:                maps.Clone(k.EvictionHard),
		EvictionSoft:                maps.Clone(k.EvictionSoft),
		EvictionSoftGracePeriod:     maps.Clone(k.EvictionSoftGracePeriod),
		EvictionMaxPodGracePeriod:   clonePtr(k.EvictionMaxPodGracePeriod),
		ImageGCHighThresholdPercent: clonePtr(k.ImageGCHighThresholdPercent),
		ImageGCLowThresholdPercent:  clonePtr(k.ImageGCLowThresholdPercent),
		CPUCFSQuota:                 clonePtr(k.CPUCFSQuota),
	}
}

// KubeletOf reads the kubelet settings a translated NodePool carries in its annotation; nil
// when it has none.
func KubeletOf(np *karpv1.NodePool) (*ec2v1.KubeletConfiguration, error) {
	raw, ok := np.Annotations[KubeletAnnotationKey]
	if !ok {
		return nil, nil
	}
	k := &ec2v1.KubeletConfiguration{}
	if err := json.Unmarshal([]byte(raw), k); err != nil {
		return nil, fmt.Errorf("reading kubelet of nodepool %s: %w", np.Name, err)
	}
	return k, nil
}

func resourceStrings(rl corev1.ResourceList) map[string]string {
	if len(rl) == 0 {
		return nil
	}
	out := make(map[string]string, len(rl))
	for name, q := range rl {
		out[string(name)] = q.String()
	}
	return out
}

func secondsOrNever(s *int64) karpv1.NillableDuration {
	if s == nil {
		return karpv1.NillableDuration{}
	}
	return karpv1.DurationOf(time.Duration(*s) * time.Second)
}

func cloneTaints(in []corev1.Taint) []corev1.Taint {
	if in == nil {
		return nil
	}
	out := make([]corev1.Taint, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
