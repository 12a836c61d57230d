package main

import (
	"strings"
	"testing"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// --preference-policy (PREFERENCE_POLICY) takes Karpenter's two values, Respect by default, and
// refuses anything else at start.
func TestPreferencePolicySetting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want scheduling.PreferencePolicy
		err  string
	}{
		{args: nil, want: scheduling.PreferenceRespect},
		{args: []string{"--preference-policy", "Ignore"}, want: scheduling.PreferenceIgnore},
		{args: []string{"--preference-policy", "Respect"}, want: scheduling.PreferenceRespect},
		{args: []string{"--preference-policy", "ignore"}, err: `--preference-policy: preference policy "ignore": want Respect or Ignore`},
	} {
		c, err := parseConfig(append([]string{"--identity", "test"}, tc.args...))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.PreferencePolicy != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, c.PreferencePolicy, tc.want)
		}
	}
}
