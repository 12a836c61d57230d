package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOldFlagNamesStillWork: the flags renamed to the one naming scheme (--decision-interval
// reads DECISION_INTERVAL) still take their old names, with the same result.
func TestOldFlagNamesStillWork(t *testing.T) {
	base := []string{"--cluster-name", "demo"}
	old, err := parseConfig(append(base, "--interval", "7s", "--workers", "5", "--urgent-workers", "3", "--kube-qps", "20", "--kube-burst", "40"))
	require.NoError(t, err)
	renamed, err := parseConfig(append(base, "--decision-interval", "7s", "--termination-workers", "5", "--urgent-termination-workers", "3",
		"--kube-client-qps", "20", "--kube-client-burst", "40"))
	require.NoError(t, err)
	assert.Equal(t, renamed, old)
	assert.Equal(t, 5, old.Workers)
	assert.Equal(t, 3, old.UrgentWorkers)
}
