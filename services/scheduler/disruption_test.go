package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The per-pool savings threshold is a percentage; anything else is refused with a reason (the
// pool then gets a Warning event and the default).
func TestParsePercent(t *testing.T) {
	for in, want := range map[string]float64{"10%": 0.10, "12.5%": 0.125, " 0% ": 0} {
		got, err := parsePercent(in)
		require.NoError(t, err, in)
		assert.InDelta(t, want, got, 1e-9, in)
	}
	for _, in := range []string{"10", "0.1", "abc%", "-5%", "100%", "150%", ""} {
		_, err := parsePercent(in)
		assert.Error(t, err, in)
	}
}
