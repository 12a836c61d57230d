package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOldFlagNamesStillWork: the flags renamed to the one naming scheme (--launch-workers
// reads LAUNCH_WORKERS) still take their old names, with the same result.
func TestOldFlagNamesStillWork(t *testing.T) {
	base := []string{"--cluster-name", "demo", "--cluster-cidr", "10.100.0.0/16"}
	old, err := parseConfig(append(base, "--workers", "6", "--template-gc-interval", "1m", "--kube-qps", "20"))
	require.NoError(t, err)
	renamed, err := parseConfig(append(base, "--launch-workers", "6", "--launch-template-gc-interval", "1m", "--kube-client-qps", "20"))
	require.NoError(t, err)
	assert.Equal(t, renamed, old)
	assert.Equal(t, 6, old.Workers)
}
