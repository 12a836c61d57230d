package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Interruptions have workers of their own, two by default; fewer than one is refused.
func TestUrgentWorkersFlag(t *testing.T) {
	t.Setenv("URGENT_TERMINATION_WORKERS", "")
	c, err := parseConfig([]string{"--cluster-name", "demo"})
	require.NoError(t, err)
	assert.Equal(t, 2, c.UrgentWorkers)
	c, err = parseConfig([]string{"--cluster-name", "demo", "--urgent-workers", "3"})
	require.NoError(t, err)
	assert.Equal(t, 3, c.UrgentWorkers)
	_, err = parseConfig([]string{"--cluster-name", "demo", "--urgent-workers", "0"})
	assert.ErrorContains(t, err, "--urgent-termination-workers must be at least 1")
}
