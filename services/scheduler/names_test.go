package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOldFlagNamesStillWork: the flags renamed to the one naming scheme (--pod-name reads
// POD_NAME) still take their old names, with the same result.
func TestOldFlagNamesStillWork(t *testing.T) {
	old, err := parseConfig([]string{"--identity", "sched-0", "--namespace", "ops", "--nomination-check", "3s", "--kube-burst", "50"})
	require.NoError(t, err)
	renamed, err := parseConfig([]string{"--pod-name", "sched-0", "--pod-namespace", "ops", "--nomination-check-interval", "3s", "--kube-client-burst", "50"})
	require.NoError(t, err)
	assert.Equal(t, renamed, old)
	assert.Equal(t, "sched-0", old.Identity)
	assert.Equal(t, "ops", old.Namespace)
}
