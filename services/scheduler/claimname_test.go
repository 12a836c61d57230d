package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// A claim's name is its pool's and a hash of its batch and its pods: the same plan of the same
// batch gives the same name whatever the pods' order, another batch or other pods another, and
// the name is a DNS label however long the pool's name.
func TestClaimNamesFollowBatchAndPlan(t *testing.T) {
	c := scheduling.NodeClaim{Name: "planned-1", NodePool: "default", PodUIDs: []string{"uid-a", "uid-b"}}
	name := claimName("batch-1", c)
	assert.Regexp(t, `^default-[a-z2-7]{10}$`, name)
	swapped := c
	swapped.PodUIDs = []string{"uid-b", "uid-a"}
	swapped.Name = "planned-2"
	assert.Equal(t, name, claimName("batch-1", swapped), "the same pods in another order, another placeholder")
	assert.NotEqual(t, name, claimName("batch-2", c), "another batch")
	other := c
	other.PodUIDs = []string{"uid-a"}
	assert.NotEqual(t, name, claimName("batch-1", other), "other pods")
	pool := c
	pool.NodePool = "spot"
	assert.NotEqual(t, strings.TrimPrefix(name, "default-"), strings.TrimPrefix(claimName("batch-1", pool), "spot-"), "another pool")
	empty := scheduling.NodeClaim{Name: "planned-1", NodePool: "default"}
	empty2 := empty
	empty2.Name = "planned-2"
	assert.NotEqual(t, claimName("batch-1", empty), claimName("batch-1", empty2), "claims without pods told apart by their place in the plan")

	long := c
	long.NodePool = strings.Repeat("p", 120)
	got := claimName("batch-1", long)
	assert.Empty(t, validation.IsDNS1123Label(got), "%s is a DNS label", got)
	assert.Len(t, got, 63)
}
