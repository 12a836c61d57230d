package main

import (
	"github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
	"github.com/fleetwright/fleetwright/pkg/apis/translate"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// legacyPools reads v1alpha5 Provisioners as pools, translated into the v1 model (a pool named
// after the Provisioner whose claims point at the EC2NodeClass its AWSNodeTemplate becomes). A
// Provisioner that does not translate is skipped with a warning, as is one whose name a v1
// NodePool already uses.
func (s *scheduler) legacyPools(taken map[string]bool, bad func(string) func(string, error)) []poolView {
	if s.cluster.provisioners == nil {
		return nil
	}
	templates := map[string]bool{}
	for _, t := range clusterstate.List[v1alpha1.AWSNodeTemplate](s.cluster.templates, bad("awsnodetemplate")) {
		templates[t.Name] = true
	}
	var out []poolView
	for _, p := range clusterstate.List[v1alpha5.Provisioner](s.cluster.provisioners, bad("provisioner")) {
		if p.DeletionTimestamp != nil {
			continue
		}
		log := s.rt.Log.Warn().Str("provisioner", p.Name)
		if taken[p.Name] {
			log.Msg("skipping provisioner: a nodepool of the same name exists")
			continue
		}
		np, err := translate.NodePool(p)
		if err != nil {
			log.Err(err).Msg("skipping provisioner that does not translate")
			continue
		}
		if ref := p.Spec.ProviderRef; ref != nil && !templates[ref.Name] {
			log.Str("awsnodetemplate", ref.Name).Msg("provisioner refers to an awsnodetemplate that does not exist")
		}
		k, err := translate.KubeletOf(np)
		if err != nil {
			log.Err(err).Msg("ignoring unreadable kubelet settings")
		}
		out = append(out, poolView{core: corePool(np), legacy: true, uid: p.UID, spec: np.Spec.Template.Spec,
			annotations: np.Spec.Template.ObjectMeta.Annotations, kubelet: kubeletConfig(k)})
	}
	return out
}
