package catalog

import "testing"

func TestCatalogMatchesSourceChecks(t *testing.T) {
	// The spot checks printed in data/PROVENANCE.md.
	tests := []struct {
		name    string
		vcpu    int
		memMiB  int64
		arch    string
		maxPods int
		price   float64
	}{
		{"m5.large", 2, 8192, "amd64", 29, 0.096},
		{"c6g.xlarge", 4, 8192, "arm64", 58, 0.136},
		{"r5.4xlarge", 16, 131072, "amd64", 234, 1.008},
	}
	for _, tt := range tests {
		it, ok := Lookup(tt.name)
		if !ok {
			t.Fatalf("%s missing from catalog", tt.name)
		}
		if it.VCPU != tt.vcpu || it.MemoryMiB != tt.memMiB || it.Arch != tt.arch || it.MaxPods != tt.maxPods || it.OnDemandPriceUSDPerHour != tt.price {
			t.Errorf("%s = %+v, want vcpu %d mem %d arch %s pods %d price %v", tt.name, it, tt.vcpu, tt.memMiB, tt.arch, tt.maxPods, tt.price)
		}
	}
	if n := len(All()); n != 1367 {
		t.Errorf("catalog has %d types, want 1367", n)
	}
	if n := len(Schedulable()); n != 1366 {
		t.Errorf("schedulable types = %d, want 1366 (all but cr1.8xlarge)", n)
	}
	if _, ok := Lookup("nope.large"); ok {
		t.Error("Lookup found a type that does not exist")
	}
}

func TestSpotPriceIsModelledBelowOnDemand(t *testing.T) {
	seen := map[float64]bool{}
	for _, it := range Schedulable() {
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			p := SpotPrice(it, z)
			if p <= 0 || p >= it.OnDemandPriceUSDPerHour {
				t.Fatalf("spot price of %s in %s = %v, want in (0, %v)", it.Name, z, p, it.OnDemandPriceUSDPerHour)
			}
			if p != SpotPrice(it, z) {
				t.Fatalf("spot price of %s not deterministic", it.Name)
			}
			seen[p] = true
		}
	}
	m5, _ := Lookup("m5.large")
	if SpotPrice(m5, "us-east-1a") == SpotPrice(m5, "us-east-1b") {
		t.Error("zones should get different modelled spot prices")
	}
	if len(seen) < 1000 {
		t.Errorf("only %d distinct spot prices: the model collapses", len(seen))
	}
}
