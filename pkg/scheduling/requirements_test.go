package scheduling

import (
	"strings"
	"testing"
)

func TestRequirementMatches(t *testing.T) {
	tests := []struct {
		name    string
		req     Requirement
		labels  map[string]string
		matches bool
	}{
		{"in matches", Requirement{Key: "k", Operator: OpIn, Values: []string{"a", "b"}}, map[string]string{"k": "b"}, true},
		{"in misses", Requirement{Key: "k", Operator: OpIn, Values: []string{"a"}}, map[string]string{"k": "c"}, false},
		{"in needs the label", Requirement{Key: "k", Operator: OpIn, Values: []string{"a"}}, nil, false},
		{"notin allows absent", Requirement{Key: "k", Operator: OpNotIn, Values: []string{"a"}}, nil, true},
		{"notin rejects", Requirement{Key: "k", Operator: OpNotIn, Values: []string{"a"}}, map[string]string{"k": "a"}, false},
		{"exists", Requirement{Key: "k", Operator: OpExists}, map[string]string{"k": ""}, true},
		{"exists needs the label", Requirement{Key: "k", Operator: OpExists}, nil, false},
		{"doesnotexist", Requirement{Key: "k", Operator: OpDoesNotExist}, nil, true},
		{"doesnotexist rejects", Requirement{Key: "k", Operator: OpDoesNotExist}, map[string]string{"k": "x"}, false},
		{"gt", Requirement{Key: "k", Operator: OpGt, Values: []string{"2"}}, map[string]string{"k": "3"}, true},
		{"gt is strict", Requirement{Key: "k", Operator: OpGt, Values: []string{"2"}}, map[string]string{"k": "2"}, false},
		{"gt needs an integer", Requirement{Key: "k", Operator: OpGt, Values: []string{"2"}}, map[string]string{"k": "x"}, false},
		{"lt", Requirement{Key: "k", Operator: OpLt, Values: []string{"2"}}, map[string]string{"k": "1"}, true},
		{"gte includes", Requirement{Key: "k", Operator: OpGte, Values: []string{"2"}}, map[string]string{"k": "2"}, true},
		{"lte includes", Requirement{Key: "k", Operator: OpLte, Values: []string{"2"}}, map[string]string{"k": "2"}, true},
		{"lte excludes", Requirement{Key: "k", Operator: OpLte, Values: []string{"2"}}, map[string]string{"k": "3"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRequirements(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Matches(tt.labels); got != tt.matches {
				t.Fatalf("Matches(%v) = %v, want %v", tt.labels, got, tt.matches)
			}
		})
	}
}

func TestRequirementsCompatible(t *testing.T) {
	tests := []struct {
		name    string
		node    []Requirement
		pod     []Requirement
		wantErr string // empty: compatible
	}{
		{"overlap", []Requirement{{Key: LabelArch, Operator: OpIn, Values: []string{"amd64", "arm64"}}},
			[]Requirement{{Key: LabelArch, Operator: OpIn, Values: []string{"arm64"}}}, ""},
		{"disjoint", []Requirement{{Key: LabelCapacityType, Operator: OpIn, Values: []string{"on-demand"}}},
			[]Requirement{{Key: LabelCapacityType, Operator: OpIn, Values: []string{"spot"}}}, "key karpenter.sh/capacity-type"},
		{"undefined well-known is fine", nil, []Requirement{{Key: LabelInstanceFamily, Operator: OpIn, Values: []string{"m5"}}}, ""},
		{"undefined custom label is not", nil, []Requirement{{Key: "team", Operator: OpIn, Values: []string{"a"}}}, "label team does not have known values"},
		{"undefined custom label with NotIn is fine", nil, []Requirement{{Key: "team", Operator: OpNotIn, Values: []string{"a"}}}, ""},
		{"undefined custom label with DoesNotExist is fine", nil, []Requirement{{Key: "team", Operator: OpDoesNotExist}}, ""},
		{"exists against doesnotexist", []Requirement{{Key: "team", Operator: OpDoesNotExist}}, []Requirement{{Key: "team", Operator: OpExists}}, "key team"},
		{"notin against doesnotexist", []Requirement{{Key: "team", Operator: OpDoesNotExist}}, []Requirement{{Key: "team", Operator: OpNotIn, Values: []string{"a"}}}, ""},
		{"gt and lt leave nothing", []Requirement{{Key: LabelInstanceCPU, Operator: OpGt, Values: []string{"4"}}},
			[]Requirement{{Key: LabelInstanceCPU, Operator: OpLt, Values: []string{"5"}}}, "key karpenter.k8s.aws/instance-cpu"},
		{"gt and in", []Requirement{{Key: LabelInstanceGeneration, Operator: OpGt, Values: []string{"2"}}},
			[]Requirement{{Key: LabelInstanceGeneration, Operator: OpIn, Values: []string{"1", "3"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := NewRequirements(tt.node...)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := NewRequirements(tt.pod...)
			if err != nil {
				t.Fatal(err)
			}
			err = node.Compatible(pod)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want compatible, got %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want error containing %q, got %v", tt.wantErr, err)
			}
		})
	}
}

func TestNewRequirementsRejectsBadNumbers(t *testing.T) {
	for _, r := range []Requirement{
		{Key: "k", Operator: OpGt, Values: []string{"x"}},
		{Key: "k", Operator: OpLt, Values: []string{"1", "2"}},
		{Key: "k", Operator: "Near"},
	} {
		if _, err := NewRequirements(r); err == nil {
			t.Errorf("NewRequirements(%+v) accepted it", r)
		}
	}
}

var fuzzOps = []Operator{OpIn, OpNotIn, OpExists, OpDoesNotExist, OpGt, OpLt, OpGte, OpLte}

// FuzzRequirements checks the requirement algebra against plain label matching: a label value
// is in the intersection exactly when both requirements match it, the intersection is the same
// either way round, and an empty intersection matches nothing.
func FuzzRequirements(f *testing.F) {
	f.Add(uint8(0), "a,b", uint8(1), "b", "b", true)
	f.Add(uint8(4), "3", uint8(5), "5", "4", true)
	f.Add(uint8(6), "-9223372036854775808", uint8(7), "9223372036854775807", "0", true)
	f.Add(uint8(2), "", uint8(3), "", "", false)
	f.Fuzz(func(t *testing.T, op1 uint8, vals1 string, op2 uint8, vals2 string, probe string, present bool) {
		mk := func(op uint8, vals string) (Requirements, bool) {
			var vs []string
			if vals != "" {
				vs = strings.Split(vals, ",")
			}
			r, err := NewRequirements(Requirement{Key: "k", Operator: fuzzOps[int(op)%len(fuzzOps)], Values: vs})
			return r, err == nil
		}
		a, ok1 := mk(op1, vals1)
		b, ok2 := mk(op2, vals2)
		if !ok1 || !ok2 {
			return
		}
		ab, ba := a.Intersect(b), b.Intersect(a)
		if ab.key() != ba.key() {
			t.Fatalf("intersection not commutative: %s vs %s", ab.key(), ba.key())
		}
		probes := []string{probe, "0", "1", "-1", "3", "4", "5", "a", "b"}
		probes = append(probes, strings.Split(vals1, ",")...)
		probes = append(probes, strings.Split(vals2, ",")...)
		for _, v := range probes {
			for _, pres := range []bool{present, !present} {
				labels := map[string]string{}
				if pres {
					labels["k"] = v
				}
				want := a.Matches(labels) && b.Matches(labels)
				if got := ab.Matches(labels); got != want {
					t.Fatalf("%s ∩ %s = %s: matches(%v)=%v, want %v", a, b, ab, labels, got, want)
				}
				if want {
					if set, _ := ab.get("k"); set.empty() {
						t.Fatalf("%s reported empty but matches %v", ab, labels)
					}
				}
			}
		}
	})
}
