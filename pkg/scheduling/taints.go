package scheduling

import "fmt"

// Taint effects.
const (
	EffectNoSchedule       = "NoSchedule"
	EffectPreferNoSchedule = "PreferNoSchedule"
	EffectNoExecute        = "NoExecute"
)

// Taint is a node taint.
type Taint struct {
	Key    string
	Value  string
	Effect string
}

// String renders the taint as kubectl does: key=value:Effect.
func (t Taint) String() string { return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect) }

// Toleration is a pod toleration. Operator is "Exists" or "Equal" (empty means Equal); an
// empty Key with Exists tolerates everything; an empty Effect matches every effect.
type Toleration struct {
	Key      string
	Operator string
	Value    string
	Effect   string
}

func (tol Toleration) tolerates(t Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key == "" {
		return tol.Operator == "Exists"
	}
	if tol.Key != t.Key {
		return false
	}
	if tol.Operator == "Exists" {
		return true
	}
	return tol.Value == t.Value
}

// untolerated returns the first taint that keeps a pod with these tolerations off a node, or
// false. PreferNoSchedule taints count unless preferNoScheduleOK (after relaxation).
func untolerated(taints []Taint, tols []Toleration, preferNoScheduleOK bool) (Taint, bool) {
	for _, t := range taints {
		if t.Effect == EffectPreferNoSchedule && preferNoScheduleOK {
			continue
		}
		ok := false
		for _, tol := range tols {
			if tol.tolerates(t) {
				ok = true
				break
			}
		}
		if !ok {
			return t, true
		}
	}
	return Taint{}, false
}
