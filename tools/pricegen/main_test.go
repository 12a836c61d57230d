package main

import (
	"encoding/json"
	"testing"
)

// table keeps Linux rows only, with the source's strings, sorted; a region priced neither way is
// left out, and other operating systems' entries, objects or not, are ignored.
func TestTable(t *testing.T) {
	var all []instance
	src := `[
	 {"instance_type":"m5.large","regions":{"eu-west-1":"Europe (Ireland)","us-east-1":"US East (N. Virginia)"},
	  "pricing":{"us-east-1":{"linux":{"ondemand":"0.096","spot_min":"0.031500","spot_max":"0.038300"},"mswin":{"ondemand":"0.188"}},
	             "eu-west-1":{"linux":{"ondemand":"0.107"},"rhel":"n/a"},
	             "xx-none-1":{"mswin":{"ondemand":"1"}}}},
	 {"instance_type":"c5.large","pricing":{"us-east-1":{"linux":{"ondemand":"0.085"}}}}]`
	if err := json.Unmarshal([]byte(src), &all); err != nil {
		t.Fatal(err)
	}
	rows, locations := table(all)
	want := [][]string{
		{"c5.large", "us-east-1", "0.085", "", ""},
		{"m5.large", "eu-west-1", "0.107", "", ""},
		{"m5.large", "us-east-1", "0.096", "0.031500", "0.038300"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %v, want %v", rows, want)
	}
	for i := range want {
		for j := range want[i] {
			if rows[i][j] != want[i][j] {
				t.Fatalf("row %d = %v, want %v", i, rows[i], want[i])
			}
		}
	}
	if len(locations) != 2 || locations[0][1] != "Europe (Ireland)" || locations[1][0] != "us-east-1" {
		t.Errorf("locations = %v", locations)
	}
}
