package service

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlagsDefaultToTheirEnvironment defines one flag of each kind: each defaults to its
// environment variable, else to its default; its usage names the variable; the command line
// wins over both; and a variable that does not parse is refused, not replaced by the default.
func TestFlagsDefaultToTheirEnvironment(t *testing.T) {
	t.Setenv("T_STR", "from-env")
	t.Setenv("T_INT", "7")
	t.Setenv("T_FLOAT", "")
	t.Setenv("T_BOOL", "true")
	t.Setenv("T_DUR", "3s")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f := Flags{fs}
	var (
		s string
		i int
		x float64
		b bool
		d time.Duration
	)
	f.String(&s, "str", "T_STR", "def", "a string")
	f.Int(&i, "int", "T_INT", 1, "an int")
	f.Float(&x, "float", "T_FLOAT", 0.5, "a float")
	f.Bool(&b, "bool", "T_BOOL", false, "a bool")
	f.Duration(&d, "dur", "T_DUR", time.Second, "a duration")
	require.NoError(t, fs.Parse([]string{"--int", "9"}))
	assert.Equal(t, "from-env", s)
	assert.Equal(t, 9, i, "the command line wins over the environment")
	assert.Equal(t, 0.5, x, "an empty variable leaves the default")
	assert.True(t, b)
	assert.Equal(t, 3*time.Second, d)
	assert.Equal(t, "a duration (env T_DUR)", fs.Lookup("dur").Usage)
	assert.Equal(t, "7", fs.Lookup("int").DefValue, "-h shows the environment's value as the default")
	require.NoError(t, EnvError())

	t.Setenv("T_DUR", "20")
	f = Flags{flag.NewFlagSet("test", flag.ContinueOnError)}
	f.Duration(&d, "dur", "T_DUR", time.Second, "a duration")
	assert.ErrorContains(t, EnvError(), `T_DUR="20" does not parse`)
	t.Setenv("T_DUR", "")
	f.Duration(&d, "dur2", "T_DUR", time.Second, "a duration")
	require.NoError(t, EnvError())
}
