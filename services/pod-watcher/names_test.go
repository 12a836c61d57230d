package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOldFlagNamesStillWork: the flags renamed to the one naming scheme (Karpenter's
// --batch-idle-duration and --batch-max-duration) still take their old names, with the same
// result.
func TestOldFlagNamesStillWork(t *testing.T) {
	old, err := parseConfig([]string{"--batch-idle", "2s", "--batch-max", "20s", "--resync", "1m", "--watcher-id", "w1"})
	require.NoError(t, err)
	renamed, err := parseConfig([]string{"--batch-idle-duration", "2s", "--batch-max-duration", "20s", "--resync-period", "1m", "--pod-name", "w1"})
	require.NoError(t, err)
	assert.Equal(t, renamed, old)
	assert.Equal(t, "w1", old.WatcherID)
}
