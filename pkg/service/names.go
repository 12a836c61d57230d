package service

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// One naming scheme for every setting of every service and the CLI: a flag --some-name reads
// the environment variable SOME_NAME when it is not given, and where Karpenter has a setting of
// that meaning, both take Karpenter's name (KUBE_CLIENT_QPS, BATCH_MAX_DURATION, ...). Two
// environment variables are named by others and keep those names: AWS_REGION (the AWS SDK's,
// --region) and FLEETWRIGHT_PREFIX (--prefix: PREFIX alone would mean anything).
//
// The names settings had before keep working, as aliases: an old flag sets the new one, an old
// environment variable is read when the new one is unset. Both are listed here, once, for
// every program.

// EnvExceptions are the flags whose environment variable is not the flag's name in capitals.
var EnvExceptions = map[string]string{"region": "AWS_REGION", "prefix": "FLEETWRIGHT_PREFIX"}

// EnvName is the environment variable a flag reads under the scheme.
func EnvName(flagName string) string {
	if e, ok := EnvExceptions[flagName]; ok {
		return e
	}
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// RenamedFlags maps an old flag name to the names that replaced it (one per program that had
// it: --workers was the launcher's and the terminator's).
var RenamedFlags = map[string][]string{
	"kube-qps":             {"kube-client-qps"},
	"kube-burst":           {"kube-client-burst"},
	"batch-idle":           {"batch-idle-duration"},
	"batch-max":            {"batch-max-duration"},
	"resync":               {"resync-period"},
	"watcher-id":           {"pod-name"},
	"identity":             {"pod-name"},
	"namespace":            {"pod-namespace"},
	"nomination-check":     {"nomination-check-interval"},
	"workers":              {"launch-workers", "termination-workers"},
	"urgent-workers":       {"urgent-termination-workers"},
	"interval":             {"decision-interval"},
	"template-gc-interval": {"launch-template-gc-interval"},
	// The CLI's.
	"creds":           {"nats-creds"},
	"tls-ca":          {"nats-ca"},
	"tls-server-name": {"nats-tls-server-name"},
}

// RenamedEnv maps an old environment variable to the one that replaced it.
var RenamedEnv = map[string]string{
	"KUBE_QPS":    "KUBE_CLIENT_QPS",
	"KUBE_BURST":  "KUBE_CLIENT_BURST",
	"NATS_TLS_CA": "NATS_CA",
}

// aliasUsage marks an alias's usage text, so the usage leaves it out of the flag list.
const aliasUsage = "old name of --"

// AddAliases defines, on fs, every old flag name whose new name fs has: setting the old flag
// sets the new one. Call it once every flag is defined; Common.Parse does.
func AddAliases(fs *flag.FlagSet) {
	for _, old := range slices.Sorted(maps.Keys(RenamedFlags)) {
		if fs.Lookup(old) != nil {
			continue
		}
		for _, name := range RenamedFlags[old] {
			if f := fs.Lookup(name); f != nil {
				fs.Var(alias{Value: f.Value, old: "--" + old, name: "--" + name}, old, aliasUsage+name)
				break
			}
		}
	}
}

// alias is an old flag: it sets the new one's value, and is recorded as used.
type alias struct {
	flag.Value
	old, name string
}

func (a alias) Set(s string) error {
	recordOld(a.old, a.name)
	return a.Value.Set(s)
}

// IsBoolFlag makes the alias of a bool flag take no argument, as the flag does.
func (a alias) IsBoolFlag() bool {
	b, ok := a.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Usage prints a program's name and version, then its flags without the aliases, then the
// aliases it accepts: the usage every service and the CLI print for -h.
func Usage(fs *flag.FlagSet, name string) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, "%s %s\n\nUsage of %s:\n", name, VersionString(), name)
		var aliases []string
		shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		shown.SetOutput(w)
		fs.VisitAll(func(f *flag.Flag) {
			if target, ok := strings.CutPrefix(f.Usage, aliasUsage); ok {
				aliases = append(aliases, "--"+f.Name+" (--"+target+")")
				return
			}
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		})
		shown.PrintDefaults()
		if len(aliases) > 0 {
			fmt.Fprintf(w, "\nOld flag names, still accepted: %s\n", strings.Join(aliases, ", "))
		}
	}
}

// usedOld records the old names a service was given (flags and environment variables), for the
// start log.
var usedOld = struct {
	sync.Mutex
	names map[string]string // old → new
}{names: map[string]string{}}

// lookupEnv is os.LookupEnv with the old names of key as fallbacks: the new name wins when both
// are set.
func lookupEnv(key string) (string, bool) {
	return LookupWith(os.Getenv)(key)
}

// LookupWith wraps a lookup (the environment, or the CLI's environment with the local stack's
// env file behind it) so that the old names of a variable are read when it is unset.
func LookupWith(get func(string) string) func(key string) (string, bool) {
	return func(key string) (string, bool) {
		if v := get(key); v != "" {
			return v, true
		}
		for _, old := range slices.Sorted(maps.Keys(RenamedEnv)) {
			if RenamedEnv[old] != key {
				continue
			}
			if v := get(old); v != "" {
				recordOld(old, key)
				return v, true
			}
		}
		return "", false
	}
}

func recordOld(old, name string) {
	usedOld.Lock()
	defer usedOld.Unlock()
	usedOld.names[old] = name
}

// OldNamesUsed says which old flag and environment variable names were used, as "OLD (now
// NEW)", in order.
func OldNamesUsed() []string {
	usedOld.Lock()
	defer usedOld.Unlock()
	var out []string
	for _, old := range slices.Sorted(maps.Keys(usedOld.names)) {
		out = append(out, old+" (now "+usedOld.names[old]+")")
	}
	return out
}
