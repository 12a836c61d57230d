package v1

import "testing"

func TestInstanceID(t *testing.T) {
	for in, want := range map[string]string{
		"aws:///us-east-1a/i-0123456789abcdef0": "i-0123456789abcdef0",
		"":                                      "",
		"i-0abc":                                "i-0abc",
	} {
		if got := InstanceID(in); got != want {
			t.Errorf("InstanceID(%q) = %q, want %q", in, got, want)
		}
	}
}
