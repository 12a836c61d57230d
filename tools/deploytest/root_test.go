package deploytest

import (
	"testing"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// root is the repository root.
func root(t testing.TB) string { return e2e.Root(t) }
