package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
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
		// The launcher says whether the pool's node class resolves; a pool it has not looked at
		// yet (no condition) is used.
		if c := meta.FindStatusCondition(p.Status.Conditions, karpv1.ConditionTypeNodeClassReady); c != nil && c.Status == metav1.ConditionFalse {
			v.notReady = append(v.notReady, fmt.Sprintf("nodepool %s is not ready: %s", p.Name, c.Message))
			continue
		}
		// Each pool plans its nodes' capacity with its node class's kubelet settings, volumes and
		// instance-store policy; settings no kubelet would take leave the pool out, saying why.
		ns := p.NodeSettings(s.cfg.VMMemoryOverhead)
		if err := ns.Validate(); err != nil {
			v.notReady = append(v.notReady, fmt.Sprintf("nodepool %s is not ready: its node class's settings: %v", p.Name, err))
			continue
		}
		core := corePool(p.NodePool)
		core.Node = &ns
		for z, id := range p.ZoneIDs {
			if v.zoneIDs == nil {
				v.zoneIDs = map[string]string{}
			}
			v.zoneIDs[z] = id // an account's zone ids are the same whichever class names the zone
		}
		if len(p.Zones) > 0 {
			// Offerings only where the node class has a subnet: nothing else can launch.
			core.Requirements = append(core.Requirements, scheduling.Requirement{Key: scheduling.LabelZone, Operator: scheduling.OpIn, Values: p.Zones})
		}
		v.pools = append(v.pools, poolView{core: core, legacy: p.Legacy, uid: p.UID, spec: p.Spec.Template.Spec,
			annotations: p.Spec.Template.ObjectMeta.Annotations, kubelet: clusterstate.KubeletConfig(p.Kubelet),
			hash: p.Hash(), classHash: p.NodeClassHash})
	}
	sortPools(v.pools)
	claims := s.cluster.Claims()
	for _, nc := range claims {
		v.claims = append(v.claims, claimStateOf(nc))
	}
	v.histories = podproj.LaunchHistories(claims)
	return v, nil
}
