package catalog

import (
	"slices"
	"testing"
)

func TestRegionalPricesMatchTheSource(t *testing.T) {
	// Rows of ec2instances.info's instances.json (2025-05-28), pricing[region].linux.
	tests := []struct {
		region, name     string
		onDemand         float64
		spotMin, spotMax float64
	}{
		{"eu-west-1", "m5.large", 0.107, 0.0475, 0.0483},
		{"eu-west-1", "c7a.large", 0.11012, 0, 0},
		{"eu-west-1", "c6id.large", 0.11445, 0, 0},
		{"us-east-1", "m5.large", 0.096, 0.0315, 0.0383},
	}
	for _, tt := range tests {
		od, ok := OnDemandPrice(tt.region, tt.name)
		if !ok || od != tt.onDemand {
			t.Errorf("OnDemandPrice(%s, %s) = %v, %v; want %v", tt.region, tt.name, od, ok, tt.onDemand)
		}
		if tt.spotMin == 0 {
			continue
		}
		lo, hi, ok := SpotPriceRange(tt.region, tt.name)
		if !ok || lo != tt.spotMin || hi != tt.spotMax {
			t.Errorf("SpotPriceRange(%s, %s) = %v, %v, %v; want %v..%v", tt.region, tt.name, lo, hi, ok, tt.spotMin, tt.spotMax)
		}
	}
	if _, ok := OnDemandPrice("eu-west-1", "nope.large"); ok {
		t.Error("a type that does not exist has a price")
	}
	if _, ok := OnDemandPrice("mars-north-1", "m5.large"); ok {
		t.Error("a region that does not exist has a price")
	}
	if _, _, ok := SpotPriceRange("mars-north-1", "m5.large"); ok {
		t.Error("a region that does not exist has a spot range")
	}
	if l, ok := Location("eu-west-1"); !ok || l != "Europe (Ireland)" {
		t.Errorf("Location(eu-west-1) = %q, %v", l, ok)
	}
}

// The two tables disagree on the order of c6id.large and c7a.large: the e2e test of a stack in
// eu-west-1 relies on it.
func TestPriceOrderDiffersBetweenRegions(t *testing.T) {
	usA, _ := OnDemandPrice("us-east-1", "c6id.large")
	usB, _ := OnDemandPrice("us-east-1", "c7a.large")
	euA, _ := OnDemandPrice("eu-west-1", "c6id.large")
	euB, _ := OnDemandPrice("eu-west-1", "c7a.large")
	if !(usA < usB && euB < euA) {
		t.Errorf("us-east-1 %v < %v and eu-west-1 %v < %v expected", usA, usB, euB, euA)
	}
}

func TestPriceTableCoverage(t *testing.T) {
	regions := PriceRegions()
	if len(regions) != 100 || !slices.Contains(regions, "eu-west-1") || !slices.Contains(regions, "ap-southeast-2") {
		t.Errorf("regions = %d (%v...), want 100 with eu-west-1 and ap-southeast-2", len(regions), regions[:3])
	}
	for _, r := range regions {
		if _, ok := Location(r); !ok {
			t.Errorf("region %s has no location name", r)
		}
	}
	if n := len(PricedTypes("eu-west-1")); n < 700 {
		t.Errorf("eu-west-1 prices %d types, want at least 700", n)
	}
	// us-east-1 keeps every price the type table has, and gains the per-region table's others.
	us := PricedTypes("us-east-1")
	if len(us) < 1366 {
		t.Errorf("us-east-1 prices %d types, want at least the type table's 1366", len(us))
	}
	for _, name := range us {
		if p, ok := OnDemandPrice("us-east-1", name); !ok || p <= 0 {
			t.Fatalf("%s listed as priced in us-east-1 without a price", name)
		}
	}
	if len(pricesCSVGz) > 1<<20 {
		t.Errorf("embedded price table is %d bytes, want under 1 MiB", len(pricesCSVGz))
	}
	for _, rs := range prices().byRegion {
		for name, p := range rs {
			if p.spotMin > 0 && p.spotMax < p.spotMin {
				t.Fatalf("%s: spot max %v below min %v", name, p.spotMax, p.spotMin)
			}
		}
	}
}

func TestModelledSpotPriceStaysInTheRealRange(t *testing.T) {
	lo, hi, _ := SpotPriceRange("eu-west-1", "m5.large")
	seen := map[float64]bool{}
	for step := int64(0); step < 48; step++ {
		for _, z := range []string{"eu-west-1a", "eu-west-1b"} {
			p, ok := ModelledSpotPrice("eu-west-1", "m5.large", z, step)
			if !ok || p < lo || p > hi {
				t.Fatalf("step %d %s: %v, %v; want within %v..%v", step, z, p, ok, lo, hi)
			}
			if q, _ := ModelledSpotPrice("eu-west-1", "m5.large", z, step); q != p {
				t.Fatal("not deterministic")
			}
			seen[p] = true
		}
	}
	if len(seen) < 20 {
		t.Errorf("only %d distinct prices over 48 hours and 2 zones: the price does not move", len(seen))
	}
	// No range: 30–70% of the region's on-demand price.
	od, _ := OnDemandPrice("eu-west-1", "c7a.large")
	if p, ok := ModelledSpotPrice("eu-west-1", "c7a.large", "eu-west-1a", 7); !ok || p < 0.3*od || p > 0.7*od {
		t.Errorf("c7a.large in eu-west-1 = %v, %v; want 30–70%% of %v", p, ok, od)
	}
	if _, ok := ModelledSpotPrice("eu-west-1", "nope.large", "eu-west-1a", 0); ok {
		t.Error("a type without any price has a spot price")
	}
}
