// Package translate is the one place where Karpenter's older API generation becomes the v1
// model: a karpenter.sh/v1alpha5 Provisioner becomes a karpenter.sh/v1 NodePool, and a
// karpenter.k8s.aws/v1alpha1 AWSNodeTemplate (or a Provisioner's inline provider) becomes a
// karpenter.k8s.aws/v1 EC2NodeClass. The services read old objects through these functions
// and work on v1 only.
//
//	Provisioner ──NodePool──────────────▶ NodePool (nodeClassRef → EC2NodeClass of the template's name)
//	     │ └─────Kubelet────────┐
//	     └─ProviderNodeTemplate─┤
//	AWSNodeTemplate ────────────┴─EC2NodeClass──▶ EC2NodeClass
//
// The mapping follows Karpenter's own migration from v1alpha5: ttlSecondsAfterEmpty becomes
// consolidationPolicy WhenEmpty with consolidateAfter of the same length; consolidation.enabled
// becomes WhenEmptyOrUnderutilized after 0s; neither means consolidateAfter Never;
// ttlSecondsUntilExpired becomes expireAfter (Never when unset, as v1alpha5 never expired
// nodes); kubelet settings move to the EC2NodeClass; selector maps become selector terms; a
// missing amiFamily is AL2, and a missing amiSelector the family's latest alias.
package translate
