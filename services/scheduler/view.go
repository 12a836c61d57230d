package main

import (
	"fmt"
)

// read takes one view of everything a solve needs from the caches and the catalog.
func (s *scheduler) read() (view, error) {
	types, byName, err := s.catalog.current()
	if err != nil {
		return view{}, fmt.Errorf("reading instance catalog: %w", err)
	}
	v := view{types: types, byName: byName, nodes: s.cluster.AllNodes(), daemonSets: s.cluster.AllDaemonSets()}
	for _, p := range s.cluster.Pools() {
		if p.DeletionTimestamp != nil {
			continue // no new capacity from a pool on its way out
		}
		v.pools = append(v.pools, poolView{core: corePool(p.NodePool), legacy: p.Legacy, uid: p.UID, spec: p.Spec.Template.Spec,
			annotations: p.Spec.Template.ObjectMeta.Annotations, kubelet: kubeletConfig(p.Kubelet)})
	}
	sortPools(v.pools)
	for _, nc := range s.cluster.Claims() {
		v.claims = append(v.claims, claimStateOf(nc))
	}
	return v, nil
}
