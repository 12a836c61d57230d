package main

import (
	"fmt"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// read takes one view of everything a solve needs from the caches and the catalog.
func (s *scheduler) read() (view, error) {
	types, byName, err := s.catalog.current()
	if err != nil {
		return view{}, fmt.Errorf("reading instance catalog: %w", err)
	}
	v := view{types: types, byName: byName, nodes: s.cluster.allNodes(), daemonSets: s.cluster.allDaemonSets()}
	bad := func(kind string) func(string, error) {
		return func(name string, err error) {
			s.rt.Log.Warn().Err(err).Str(kind, name).Msgf("skipping %s that does not decode", kind)
		}
	}
	classes := map[string]*ec2v1.EC2NodeClass{}
	for _, c := range clusterstate.List[ec2v1.EC2NodeClass](s.cluster.nodeClasses, bad("ec2nodeclass")) {
		classes[c.Name] = c
	}
	for _, np := range clusterstate.List[karpv1.NodePool](s.cluster.nodePools, bad("nodepool")) {
		if np.DeletionTimestamp != nil {
			continue
		}
		p := poolView{core: corePool(np), uid: np.UID, spec: np.Spec.Template.Spec, annotations: np.Spec.Template.ObjectMeta.Annotations}
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && classes[ref.Name] != nil {
			p.kubelet = kubeletConfig(classes[ref.Name].Spec.Kubelet)
		}
		v.pools = append(v.pools, p)
	}
	taken := map[string]bool{}
	for _, p := range v.pools {
		taken[p.core.Name] = true
	}
	v.pools = append(v.pools, s.legacyPools(taken, bad)...)
	sortPools(v.pools)
	for _, nc := range clusterstate.List[karpv1.NodeClaim](s.cluster.nodeClaims, bad("nodeclaim")) {
		v.claims = append(v.claims, claimStateOf(nc))
	}
	return v, nil
}
