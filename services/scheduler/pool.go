package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// poolView is a NodePool as the scheduler uses it: the core's pool, plus what each NodeClaim
// made from it carries. v1alpha5 Provisioners arrive here translated, marked legacy.
type poolView struct {
	core scheduling.NodePool
	// legacy pools are v1alpha5 Provisioners: their claims are labelled with the provisioner's
	// name and have no owner (a Provisioner is not a NodePool).
	legacy bool
	uid    types.UID
	spec   karpv1.NodeClaimTemplateSpec
	// annotations of the template, put on each NodeClaim.
	annotations map[string]string
	// kubelet settings of the pool's node class, for the LaunchIntent.
	kubelet *launchv1.KubeletConfig
	// hash of the pool (NodePool.Hash) and of its node class (EC2NodeClass.Hash; "" while
	// unknown), recorded on each NodeClaim for drift detection.
	hash, classHash string
}

// corePool converts a v1 NodePool into the core's pool.
func corePool(np *karpv1.NodePool) scheduling.NodePool {
	t := np.Spec.Template
	out := scheduling.NodePool{Name: np.Name, Labels: t.ObjectMeta.Labels, Limits: podproj.CoreResources(corev1.ResourceList(np.Spec.Limits))}
	if np.Spec.Weight != nil {
		out.Weight = *np.Spec.Weight
	}
	for _, r := range t.Spec.Requirements {
		req := scheduling.Requirement{Key: r.Key, Operator: scheduling.Operator(r.Operator), Values: r.Values}
		if r.MinValues != nil {
			req.MinValues = *r.MinValues
		}
		out.Requirements = append(out.Requirements, req)
	}
	out.Taints = coreTaints(t.Spec.Taints)
	out.StartupTaints = coreTaints(t.Spec.StartupTaints)
	return out
}

func coreTaints(ts []corev1.Taint) []scheduling.Taint {
	out := make([]scheduling.Taint, 0, len(ts))
	for _, t := range ts {
		out = append(out, scheduling.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

// nodeClassRef converts a NodeClaim's node class reference for messages.
func nodeClassRef(r *karpv1.NodeClassReference) *commonv1.ObjectRef {
	if r == nil {
		return nil
	}
	return &commonv1.ObjectRef{Group: r.Group, Kind: r.Kind, Name: r.Name}
}
