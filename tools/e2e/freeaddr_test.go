package e2e_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// FreeAddr hands out listenable loopback ports below the kernel's ephemeral range (where no
// outgoing connection takes them meanwhile), never the same one twice.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr := e2e.FreeAddr(t)
		require.False(t, seen[addr], "%s handed out twice", addr)
		seen[addr] = true
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", host)
		p, err := strconv.Atoi(port)
		require.NoError(t, err)
		assert.Less(t, p, 32768, "below the ephemeral range")
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "%s can be listened on", addr)
		_ = l.Close()
	}
}
