package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Operator is a node selector operator, as in Kubernetes, plus Gte and Lte (Karpenter's
// numeric extensions).
type Operator string

// The operators a Requirement may use.
const (
	OpIn           Operator = "In"
	OpNotIn        Operator = "NotIn"
	OpExists       Operator = "Exists"
	OpDoesNotExist Operator = "DoesNotExist"
	OpGt           Operator = "Gt"
	OpLt           Operator = "Lt"
	OpGte          Operator = "Gte"
	OpLte          Operator = "Lte"
)

// Requirement constrains the value of one node label. Gt, Lt, Gte and Lte take exactly one
// integer value. MinValues (NodePool requirements only) asks that every NodeClaim keep at least
// that many distinct values of the key among its instance-type options; 0 means no minimum.
type Requirement struct {
	Key       string
	Operator  Operator
	Values    []string
	MinValues int
}

// valueSet is the set of values a label may take. The element "absent" (written ⊥) stands for
// the label not being set at all, so Kubernetes' semantics fall out of plain set algebra:
// In S = S, NotIn S = everything but S plus ⊥, Exists = every value, DoesNotExist = {⊥},
// Gt n = the integers above n. Integer bounds apply to values, never to ⊥.
type valueSet struct {
	complement bool     // values lists what is excluded rather than included
	values     []string // sorted, unique
	absent     bool     // ⊥ is a member
	hasGt      bool
	gt         int64 // members are > gt
	hasLt      bool
	lt         int64 // members are < lt
}

// newValueSet compiles one operator and its values.
func newValueSet(op Operator, values []string) (valueSet, error) {
	switch op {
	case OpIn:
		return valueSet{values: sortedUnique(values)}, nil
	case OpNotIn:
		return valueSet{complement: true, values: sortedUnique(values), absent: true}, nil
	case OpExists:
		return valueSet{complement: true}, nil
	case OpDoesNotExist:
		return valueSet{absent: true}, nil
	case OpGt, OpLt, OpGte, OpLte:
		if len(values) != 1 {
			return valueSet{}, fmt.Errorf("operator %s takes exactly one value, got %d", op, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return valueSet{}, fmt.Errorf("operator %s needs an integer: %w", op, err)
		}
		s := valueSet{complement: true}
		switch op {
		case OpGt:
			s.hasGt, s.gt = true, n
		case OpGte:
			s.hasGt, s.gt = n != math.MinInt64, n-1
		case OpLt:
			s.hasLt, s.lt = true, n
		case OpLte:
			s.hasLt, s.lt = n != math.MaxInt64, n+1
		}
		return s, nil
	}
	return valueSet{}, fmt.Errorf("unknown operator %q", op)
}

func sortedUnique(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	w := 0
	for i, v := range out {
		if i == 0 || v != out[w-1] {
			out[w] = v
			w++
		}
	}
	return out[:w]
}

func (s valueSet) bounded() bool { return s.hasGt || s.hasLt }

func (s valueSet) inBounds(v string) bool {
	if !s.bounded() {
		return true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	return (!s.hasGt || n > s.gt) && (!s.hasLt || n < s.lt)
}

// has reports whether the label value v (a present label) is a member.
func (s valueSet) has(v string) bool {
	if !s.inBounds(v) {
		return false
	}
	i := sort.SearchStrings(s.values, v)
	listed := i < len(s.values) && s.values[i] == v
	return listed != s.complement
}

// matches reports whether a label that is set to v (present) or unset (!present) is a member.
func (s valueSet) matches(v string, present bool) bool {
	if !present {
		return s.absent
	}
	return s.has(v)
}

// intersect returns the members of both sets, normalised so equal sets compare equal.
func (s valueSet) intersect(o valueSet) valueSet {
	r := valueSet{absent: s.absent && o.absent}
	r.hasGt, r.gt = tighter(s.hasGt, s.gt, o.hasGt, o.gt, o.gt > s.gt)
	r.hasLt, r.lt = tighter(s.hasLt, s.lt, o.hasLt, o.lt, o.lt < s.lt)
	switch {
	case !s.complement && !o.complement:
		r.values = intersectSorted(s.values, o.values)
	case !s.complement:
		r.values = subtractSorted(s.values, o.values)
	case !o.complement:
		r.values = subtractSorted(o.values, s.values)
	default:
		r.complement = true
		r.values = unionSorted(s.values, o.values)
	}
	return r.normalise()
}

// tighter intersects two optional bounds a and b: the one that is set, or b when both are and
// bTighter.
func tighter(ha bool, a int64, hb bool, b int64, bTighter bool) (bool, int64) {
	if ha && (!hb || !bTighter) {
		return true, a
	}
	return hb, b
}

// normalise drops what bounds make redundant: listed values outside the bounds, and the
// bounds themselves once a finite set lists its members.
func (s valueSet) normalise() valueSet {
	if !s.bounded() {
		return s
	}
	kept := s.values[:0:0]
	for _, v := range s.values {
		if s.inBounds(v) {
			kept = append(kept, v)
		}
	}
	s.values = kept
	if !s.complement {
		s.hasGt, s.gt, s.hasLt, s.lt = false, 0, false, 0
	}
	return s
}

// empty reports whether nothing (not even ⊥) is a member.
func (s valueSet) empty() bool {
	if s.absent {
		return false
	}
	if !s.complement {
		return len(s.values) == 0
	}
	if s.hasGt && s.hasLt {
		if s.lt <= s.gt {
			return true
		}
		span := uint64(s.lt) - uint64(s.gt) - 1 // integers strictly between, without overflow
		return span <= uint64(len(s.values))
	}
	return false
}

// finite reports whether the present values are a finite listed set, and lists them.
func (s valueSet) finite() ([]string, bool) { return s.values, !s.complement }

func (s valueSet) String() string {
	var parts []string
	switch {
	case !s.complement && len(s.values) == 0 && s.absent:
		return "DoesNotExist"
	case !s.complement:
		parts = append(parts, "In ["+strings.Join(s.values, " ")+"]")
	case len(s.values) > 0:
		parts = append(parts, "NotIn ["+strings.Join(s.values, " ")+"]")
	case !s.bounded() && !s.absent:
		parts = append(parts, "Exists")
	}
	if s.hasGt {
		parts = append(parts, fmt.Sprintf("Gt %d", s.gt))
	}
	if s.hasLt {
		parts = append(parts, fmt.Sprintf("Lt %d", s.lt))
	}
	if s.absent && s.complement && len(s.values) == 0 {
		parts = append(parts, "Exists or DoesNotExist")
	}
	return strings.Join(parts, ", ")
}

// key renders the set canonically, for interning.
func (s valueSet) key(b *strings.Builder) {
	if s.complement {
		b.WriteByte('!')
	}
	if s.absent {
		b.WriteByte('_')
	}
	if s.hasGt {
		fmt.Fprintf(b, ">%d", s.gt)
	}
	if s.hasLt {
		fmt.Fprintf(b, "<%d", s.lt)
	}
	b.WriteByte('[')
	for i, v := range s.values {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(v)
	}
	b.WriteByte(']')
}

func intersectSorted(a, b []string) []string {
	var out []string
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			out = append(out, a[i])
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return out
}

func subtractSorted(a, b []string) []string {
	var out []string
	j := 0
	for _, v := range a {
		for j < len(b) && b[j] < v {
			j++
		}
		if j < len(b) && b[j] == v {
			continue
		}
		out = append(out, v)
	}
	return out
}

func unionSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// keyedSet is one key's compiled requirement; minValues carries a NodePool's minimum.
type keyedSet struct {
	key       string
	set       valueSet
	minValues int
}

// Requirements is a compiled conjunction of requirements, at most one set per key, sorted by
// key. The zero value requires nothing.
type Requirements []keyedSet

// NewRequirements compiles requirements; several on one key are intersected.
func NewRequirements(reqs ...Requirement) (Requirements, error) {
	var out Requirements
	for _, r := range reqs {
		s, err := newValueSet(r.Operator, r.Values)
		if err != nil {
			return nil, fmt.Errorf("compiling requirement on %s: %w", r.Key, err)
		}
		key := r.Key
		if k, ok := normalizedLabels[key]; ok {
			key = k
		}
		out = out.with(keyedSet{key: key, set: s, minValues: r.MinValues})
	}
	return out, nil
}

// get returns the set for key, if any.
func (r Requirements) get(key string) (valueSet, bool) {
	i := sort.Search(len(r), func(i int) bool { return r[i].key >= key })
	if i < len(r) && r[i].key == key {
		return r[i].set, true
	}
	return valueSet{}, false
}

// with returns r with ks intersected in, leaving r unchanged.
func (r Requirements) with(ks keyedSet) Requirements {
	i := sort.Search(len(r), func(i int) bool { return r[i].key >= ks.key })
	out := make(Requirements, 0, len(r)+1)
	out = append(out, r[:i]...)
	if i < len(r) && r[i].key == ks.key {
		merged := r[i]
		merged.set = merged.set.intersect(ks.set)
		merged.minValues = max(merged.minValues, ks.minValues)
		out = append(out, merged)
		i++
	} else {
		out = append(out, ks)
	}
	return append(out, r[i:]...)
}

// Intersect returns the conjunction of both.
func (r Requirements) Intersect(o Requirements) Requirements {
	out := make(Requirements, 0, len(r)+len(o))
	i, j := 0, 0
	for i < len(r) || j < len(o) {
		switch {
		case j == len(o) || (i < len(r) && r[i].key < o[j].key):
			out = append(out, r[i])
			i++
		case i == len(r) || o[j].key < r[i].key:
			out = append(out, o[j])
			j++
		default:
			m := r[i]
			m.set = m.set.intersect(o[j].set)
			m.minValues = max(m.minValues, o[j].minValues)
			out = append(out, m)
			i++
			j++
		}
	}
	return out
}

// Compatible reports why a pod's requirements o cannot hold on a new node whose requirements
// are r, or nil if they can. As in Karpenter, a key both name must leave some value; a key only
// o names is fine if it is well known (the instance types and offerings decide it) or if o
// allows the label to be absent, since a new node only carries labels its pool gives it.
func (r Requirements) Compatible(o Requirements) error {
	for _, ks := range o {
		if mine, ok := r.get(ks.key); ok {
			if mine.intersect(ks.set).empty() {
				return fmt.Errorf("key %s: requires %s but the node allows %s", ks.key, ks.set, mine)
			}
			continue
		}
		if isWellKnown(ks.key) || ks.set.absent {
			continue
		}
		return fmt.Errorf("label %s does not have known values", ks.key)
	}
	return nil
}

// Matches reports whether a node with these labels satisfies every requirement.
func (r Requirements) Matches(labels map[string]string) bool {
	for _, ks := range r {
		v, ok := labels[ks.key]
		if !ks.set.matches(v, ok) {
			return false
		}
	}
	return true
}

// explainMismatch names the first requirement a node's labels fail.
func (r Requirements) explainMismatch(labels map[string]string) string {
	for _, ks := range r {
		v, ok := labels[ks.key]
		if !ks.set.matches(v, ok) {
			if !ok {
				return fmt.Sprintf("label %s is not set but %s is required", ks.key, ks.set)
			}
			return fmt.Sprintf("label %s=%s but %s is required", ks.key, v, ks.set)
		}
	}
	return ""
}

// key renders the requirements canonically, for interning.
func (r Requirements) key() string {
	var b strings.Builder
	for _, ks := range r {
		b.WriteString(ks.key)
		b.WriteByte('=')
		ks.set.key(&b)
		if ks.minValues > 0 {
			fmt.Fprintf(&b, "#%d", ks.minValues)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// String renders the requirements for people.
func (r Requirements) String() string {
	parts := make([]string, len(r))
	for i, ks := range r {
		parts[i] = ks.key + " " + ks.set.String()
	}
	return strings.Join(parts, ", ")
}
