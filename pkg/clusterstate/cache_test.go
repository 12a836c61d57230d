package clusterstate

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
)

// A read model asked for every couple of seconds says a warning once per change of its object.
func TestWarningsAreLoggedOncePerVersion(t *testing.T) {
	var buf bytes.Buffer
	c := &Cache{log: zerolog.New(&buf)}
	warn := func(version string) {
		c.once("provisioner/legacy/no translation", version, func() { c.log.Warn().Msg("skipping") })
	}
	warn("41")
	warn("41")
	warn("42")
	warn("42")
	assert.Equal(t, 2, strings.Count(buf.String(), "skipping"))
}

// Asking to hear of an informer the cache does not hold (not in its Want) is an error, not a
// callback that never comes.
func TestOnChangeRefusesInformersNotHeld(t *testing.T) {
	c := &Cache{}
	err := c.OnChange(func() {}, c.Nodes)
	assert.ErrorContains(t, err, "not held by this cache")
	assert.Error(t, c.OnChange(func() {}))
}
