package scheduling

import "fmt"

// PreferencePolicy says what a solve makes of pods' preferences, as Karpenter's
// --preference-policy: preferred node affinity, preferred pod affinity and anti-affinity, and
// ScheduleAnyway topology spread.
type PreferencePolicy string

const (
	// PreferenceRespect keeps a pod's preferences until it cannot be placed, then drops them one
	// at a time in Karpenter's order (relax): the heaviest preferred pod affinity term, then
	// anti-affinity term, then node affinity term, then ScheduleAnyway spreads. The default.
	PreferenceRespect PreferencePolicy = "Respect"
	// PreferenceIgnore plans as if pods had no preferences.
	PreferenceIgnore PreferencePolicy = "Ignore"
)

// ParsePreferencePolicy reads a policy as Karpenter spells it; "" is Respect.
func ParsePreferencePolicy(s string) (PreferencePolicy, error) {
	switch PreferencePolicy(s) {
	case "", PreferenceRespect:
		return PreferenceRespect, nil
	case PreferenceIgnore:
		return PreferenceIgnore, nil
	}
	return "", fmt.Errorf("preference policy %q: want %s or %s", s, PreferenceRespect, PreferenceIgnore)
}

// newPodState is a pending pod at its starting relaxation: none under Respect; under Ignore,
// every preference already dropped (and never reported as relaxed).
func (s *solver) newPodState(p *Pod) *podState {
	ps := &podState{pod: p, req: s.podRequests(p)}
	if s.in.PreferencePolicy == PreferenceIgnore {
		ps.relax0 = relaxState{prefAff: len(p.PodAffinity.Preferred), prefAnti: len(p.PodAntiAffinity.Preferred),
			prefNode: len(p.PreferredNodeAffinity), anyway: countAnyway(p)}
	}
	ps.relax = ps.relax0
	ps.shape = s.shapeFor(ps)
	ps.shape0 = ps.shape
	return ps
}
