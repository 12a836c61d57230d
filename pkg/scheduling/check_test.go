package scheduling

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"
)

// checkPlan verifies a plan against its input independently of the solver's bookkeeping:
// every pod accounted for once, no node over capacity, every hard constraint held on every
// type, zone and capacity type a claim may launch as, pool limits respected.
func checkPlan(t *testing.T, in Input, plan Plan) {
	t.Helper()
	pods := map[string]*Pod{}
	for i := range in.Pods {
		pods[in.Pods[i].UID] = &in.Pods[i]
	}
	seen := map[string]string{}
	mark := func(uid, where string) {
		if prev, ok := seen[uid]; ok {
			t.Fatalf("pod %s placed twice: %s and %s", uid, prev, where)
		}
		if pods[uid] == nil {
			t.Fatalf("unknown pod %s in plan", uid)
		}
		seen[uid] = where
	}
	types := map[string]*InstanceType{}
	for i := range in.InstanceTypes {
		types[in.InstanceTypes[i].Name] = &in.InstanceTypes[i]
	}
	pools := map[string]*NodePool{}
	for i := range in.NodePools {
		pools[in.NodePools[i].Name] = &in.NodePools[i]
	}
	unavailable := map[OfferingKey]bool{}
	for _, k := range in.Unavailable {
		unavailable[k] = true
	}
	// Where each pod ended up, as the set of label maps it might see.
	type home struct {
		name   string
		zones  []string
		labels []map[string]string
	}
	homes := map[string]home{}
	limitUse := map[string]ResourceList{}

	for _, nc := range plan.NodeClaims {
		pool := pools[nc.NodePool]
		if pool == nil {
			t.Fatalf("claim %s names unknown pool %s", nc.Name, nc.NodePool)
		}
		if len(nc.InstanceTypes) == 0 || len(nc.InstanceTypes) > 60 {
			t.Fatalf("claim %s has %d instance types", nc.Name, len(nc.InstanceTypes))
		}
		sum := ResourceList{}
		for _, uid := range nc.PodUIDs {
			mark(uid, nc.Name)
			for n, q := range pods[uid].Requests {
				sum[n] += q
			}
			sum[ResourcePods]++
		}
		for n, q := range sum {
			if nc.Requests[n] < q {
				t.Fatalf("claim %s requests %s below its pods' %s", nc.Name, FormatResources(nc.Requests), FormatResources(sum))
			}
		}
		maxCap := ResourceList{}
		prev := -1.0
		var labelSets []map[string]string
		for _, name := range nc.InstanceTypes {
			it := types[name]
			alloc := it.Allocatable()
			for n, q := range nc.Requests {
				if q > alloc[n] {
					t.Fatalf("claim %s over capacity on %s: %s needs %d, has %d", nc.Name, name, n, q, alloc[n])
				}
			}
			for n, q := range it.Capacity {
				maxCap[n] = max(maxCap[n], q)
			}
			price := math.Inf(1)
			for _, o := range it.Offerings {
				allowed := slices.Contains(nc.Zones, o.Zone) && slices.Contains(nc.CapacityTypes, o.CapacityType)
				if allowed && o.Available && !unavailable[OfferingKey{name, o.Zone, o.CapacityType}] {
					price = min(price, o.PriceUSDPerHour)
				}
			}
			if math.IsInf(price, 1) {
				t.Fatalf("claim %s lists %s without an available offering", nc.Name, name)
			}
			if price < prev-1e-12 {
				t.Fatalf("claim %s options not cheapest first at %s", nc.Name, name)
			}
			prev = price
			for _, z := range nc.Zones {
				for _, ct := range nc.CapacityTypes {
					l := map[string]string{LabelZone: z, LabelCapacityType: ct, LabelNodePool: pool.Name}
					if id, ok := in.ZoneIDs[z]; ok {
						l[LabelZoneID] = id // as the launcher labels the node
					}
					for k, v := range it.Labels {
						l[k] = v
					}
					for k, v := range nc.Labels {
						l[k] = v
					}
					// As the kubelet, the cloud controller and the EBS CSI driver label it.
					for old, key := range normalizedLabels {
						if v, ok := l[key]; ok {
							l[old] = v
						}
					}
					labelSets = append(labelSets, l)
				}
			}
		}
		for n, q := range maxCap {
			limitUse[pool.Name] = addTo(limitUse[pool.Name], n, q)
		}
		for _, uid := range nc.PodUIDs {
			p := pods[uid]
			if tt, bad := untolerated(pool.Taints, p.Tolerations, true); bad {
				t.Fatalf("pod %s on claim %s does not tolerate %s", uid, nc.Name, tt)
			}
			homes[uid] = home{name: nc.Name, zones: nc.Zones, labels: labelSets}
		}
	}
	nodes := map[string]*Node{}
	nodeUse := map[string]ResourceList{}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		nodes[n.Name] = n
		nodeUse[n.Name] = ResourceList{}
		for _, p := range n.Pods {
			for r, q := range p.Requests {
				nodeUse[n.Name][r] += q
			}
			nodeUse[n.Name][ResourcePods]++
		}
		c := n.Capacity
		if c == nil {
			c = n.Allocatable
		}
		for r, q := range c {
			limitUse[n.NodePool] = addTo(limitUse[n.NodePool], r, q)
		}
	}
	for _, pl := range plan.Placements {
		mark(pl.PodUID, pl.Node)
		n := nodes[pl.Node]
		p := pods[pl.PodUID]
		if tt, bad := untolerated(n.Taints, p.Tolerations, true); bad {
			t.Fatalf("pod %s on node %s does not tolerate %s", p.UID, n.Name, tt)
		}
		for r, q := range p.Requests {
			nodeUse[n.Name][r] += q
		}
		nodeUse[n.Name][ResourcePods]++
		homes[p.UID] = home{name: n.Name, zones: []string{n.Labels[LabelZone]}, labels: []map[string]string{n.Labels}}
	}
	for name, use := range nodeUse {
		for r, q := range use {
			if q > nodes[name].Allocatable[r] && q > 0 {
				if len(nodePlaced(plan, name)) > 0 {
					t.Fatalf("node %s over capacity: %s %d > %d", name, r, q, nodes[name].Allocatable[r])
				}
			}
		}
	}
	for _, u := range plan.Unschedulable {
		mark(u.PodUID, "unschedulable")
		if u.Reason == "" {
			t.Fatalf("pod %s unschedulable without a reason", u.PodUID)
		}
	}
	if len(seen) != len(in.Pods) {
		t.Fatalf("%d of %d pods accounted for", len(seen), len(in.Pods))
	}
	for _, p := range in.NodePools {
		for r, lim := range p.Limits {
			if limitUse[p.Name][r] > lim {
				t.Fatalf("pool %s uses %d %s over its limit %d", p.Name, limitUse[p.Name][r], r, lim)
			}
		}
	}
	// Hard node constraints on every possible label set.
	for uid, h := range homes {
		p := pods[uid]
		for _, l := range h.labels {
			if !hardNodeMatch(p, l) {
				t.Fatalf("pod %s on %s violates its node requirements with labels %v", uid, h.name, l)
			}
		}
	}
	checkTopology(t, in, plan, pods, func(uid string) (string, []string, bool) {
		h, ok := homes[uid]
		return h.name, h.zones, ok
	})
}

func nodePlaced(plan Plan, node string) []string {
	var out []string
	for _, pl := range plan.Placements {
		if pl.Node == node {
			out = append(out, pl.PodUID)
		}
	}
	return out
}

func addTo(rl ResourceList, n string, q int64) ResourceList {
	if rl == nil {
		rl = ResourceList{}
	}
	rl[n] += q
	return rl
}

// hardNodeMatch evaluates nodeSelector, required node affinity (any term) and volume
// requirements with plain Kubernetes semantics.
func hardNodeMatch(p *Pod, labels map[string]string) bool {
	for k, v := range p.NodeSelector {
		if labels[k] != v {
			return false
		}
	}
	vol, err := NewRequirements(p.VolumeRequirements...)
	if err != nil || !vol.Matches(labels) {
		return false
	}
	if len(p.RequiredNodeAffinity) == 0 {
		return true
	}
	for _, term := range p.RequiredNodeAffinity {
		r, err := NewRequirements(term.Requirements...)
		if err == nil && r.Matches(labels) {
			return true
		}
	}
	return false
}

// checkTopology verifies required anti-affinity, required zone/hostname affinity, hostname and
// zone spreads (DoNotSchedule) and host ports over the final placement.
func checkTopology(t *testing.T, in Input, plan Plan, pods map[string]*Pod, where func(string) (string, []string, bool)) {
	t.Helper()
	type placed struct {
		p     *Pod
		node  string
		zones []string
	}
	var all []placed
	for i := range in.Nodes {
		for j := range in.Nodes[i].Pods {
			all = append(all, placed{&in.Nodes[i].Pods[j], in.Nodes[i].Name, []string{in.Nodes[i].Labels[LabelZone]}})
		}
	}
	for i := range in.Pods {
		if n, z, ok := where(in.Pods[i].UID); ok {
			all = append(all, placed{&in.Pods[i], n, z})
		}
	}
	sameDomain := func(a, b placed, key string) bool {
		if key == LabelHostname {
			return a.node == b.node
		}
		for _, z := range a.zones {
			if slices.Contains(b.zones, z) {
				return true
			}
		}
		return false
	}
	selects := func(sel *LabelSelector, nss []string, owner, p *Pod) bool {
		if sel == nil {
			return false
		}
		if len(nss) == 0 {
			nss = []string{owner.Namespace}
		}
		r, _ := selectorRequirements(sel)
		return slices.Contains(nss, p.Namespace) && r.Matches(p.Labels)
	}
	zoneSet := map[string]bool{}
	for _, it := range in.InstanceTypes {
		for _, o := range it.Offerings {
			zoneSet[o.Zone] = true
		}
	}
	universe := slices.Sorted(maps.Keys(zoneSet))
	ports := map[string]bool{}
	for _, a := range all {
		for _, hp := range a.p.HostPorts {
			k := fmt.Sprintf("%s/%d/%s", a.node, hp.Port, protocol(hp))
			if ports[k] {
				t.Fatalf("host port %s bound twice", k)
			}
			ports[k] = true
		}
		for _, term := range a.p.PodAntiAffinity.Required {
			for _, b := range all {
				if a.p != b.p && sameDomain(a, b, term.TopologyKey) && selects(term.LabelSelector, term.Namespaces, a.p, b.p) {
					t.Fatalf("pod %s shares %s with %s against its anti-affinity", a.p.UID, term.TopologyKey, b.p.UID)
				}
			}
		}
		for _, term := range a.p.PodAffinity.Required {
			if term.TopologyKey == LabelZone && len(a.zones) != 1 {
				t.Fatalf("pod %s with zone affinity on a claim spanning zones %v", a.p.UID, a.zones)
			}
			found := false
			for _, b := range all {
				if sameDomain(a, b, term.TopologyKey) && selects(term.LabelSelector, term.Namespaces, a.p, b.p) {
					found = true
				}
			}
			if !found {
				t.Fatalf("pod %s has no affinity partner in its %s", a.p.UID, term.TopologyKey)
			}
		}
		for _, c := range a.p.TopologySpread {
			if c.WhenUnsatisfiable != DoNotSchedule {
				continue
			}
			counts := map[string]int{}
			for _, b := range all {
				if selects(c.LabelSelector, nil, a.p, b.p) {
					if c.TopologyKey == LabelHostname {
						counts[b.node]++
					} else if len(b.zones) == 1 {
						counts[b.zones[0]]++
					}
				}
			}
			if c.TopologyKey == LabelHostname {
				if counts[a.node] > int(max(c.MaxSkew, 1)) {
					t.Fatalf("node %s holds %d pods of a hostname spread with maxSkew %d", a.node, counts[a.node], c.MaxSkew)
				}
				continue
			}
			if c.TopologyKey != LabelZone {
				continue
			}
			if len(a.zones) != 1 {
				t.Fatalf("pod %s with zone spread on a claim spanning zones %v", a.p.UID, a.zones)
			}
			// Spreads are judged when each pod is placed; the final counts can only be checked
			// when the selector picks nothing but pods with the same constraint.
			onlyOwners := true
			for _, b := range all {
				if selects(c.LabelSelector, nil, a.p, b.p) && !hasSpread(b.p, c) {
					onlyOwners = false
				}
			}
			if !onlyOwners {
				continue
			}
			lo, hi := 1<<30, 0
			for _, z := range universe {
				lo, hi = min(lo, counts[z]), max(hi, counts[z])
			}
			if hi-lo > int(max(c.MaxSkew, 1)) {
				t.Fatalf("zone spread of pod %s skewed: %v", a.p.UID, counts)
			}
		}
	}
}

func hasSpread(p *Pod, c TopologySpreadConstraint) bool {
	for _, x := range p.TopologySpread {
		if reflect.DeepEqual(x, c) {
			return true
		}
	}
	return false
}
