package service

import (
	"flag"
	"time"
)

// Flags defines flags that each default to an environment variable, else to def; a flag's
// usage ends with its variable's name, "(env NAME)". A variable that is set but does not parse
// is refused at start (see EnvError).
type Flags struct{ *flag.FlagSet }

// String defines a string flag.
func (f Flags) String(p *string, name, env, def, usage string) {
	f.StringVar(p, name, Env(env, def), withEnv(usage, env))
}

// Int defines an int flag.
func (f Flags) Int(p *int, name, env string, def int, usage string) {
	f.IntVar(p, name, EnvInt(env, def), withEnv(usage, env))
}

// Float defines a float flag.
func (f Flags) Float(p *float64, name, env string, def float64, usage string) {
	f.Float64Var(p, name, EnvFloat(env, def), withEnv(usage, env))
}

// Bool defines a bool flag.
func (f Flags) Bool(p *bool, name, env string, def bool, usage string) {
	f.BoolVar(p, name, EnvBool(env, def), withEnv(usage, env))
}

// Duration defines a duration flag.
func (f Flags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	f.DurationVar(p, name, EnvDuration(env, def), withEnv(usage, env))
}

func withEnv(usage, env string) string { return usage + " (env " + env + ")" }
