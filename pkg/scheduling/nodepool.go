package scheduling

// NodePool is Karpenter's v1 NodePool, reduced to what scheduling needs. Requirements and
// Labels constrain and label every NodeClaim; Taints are placed on its nodes and must be
// tolerated; StartupTaints are placed too but ignored when placing pods. Limits caps the total
// capacity of the pool's nodes (existing, in flight and planned); a missing resource is
// unlimited. Higher Weight pools are tried first. Node, when set, is what the pool's node class
// decides about its nodes' capacity (kubelet settings, root volume, RAID0, VM overhead): the
// pool plans every type's capacity and allocatable under it; nil plans with the types' own.
type NodePool struct {
	Name          string
	Weight        int32
	Requirements  []Requirement
	Labels        map[string]string
	Taints        []Taint
	StartupTaints []Taint
	Limits        ResourceList
	Node          *NodeSettings
}

// poolRequirements compiles what every NodeClaim of the pool must satisfy: its requirements,
// its labels, and its own name. Karpenter v1 adds no defaults for what a pool leaves unsaid
// (v1alpha5's admission defaults are added when a Provisioner is translated).
func poolRequirements(p NodePool) (Requirements, error) {
	all := append([]Requirement(nil), p.Requirements...)
	all = append(all, Requirement{Key: LabelNodePool, Operator: OpIn, Values: []string{p.Name}})
	for k, v := range p.Labels {
		all = append(all, Requirement{Key: k, Operator: OpIn, Values: []string{v}})
	}
	return NewRequirements(all...)
}
