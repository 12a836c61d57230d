package service

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// build is what the binary says about its build: Version when set at build time, else the
// module's version if the binary was built from one; the VCS revision the Go toolchain
// stamped, "unknown" without one.
func build() (version, commit string) {
	version, commit = Version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				commit = s.Value
			}
		}
	}
	return version, commit
}

// VersionString is the version line --version and -h print: "v0.2.0 (commit abc123…, go1.26.8)".
func VersionString() string {
	version, commit := build()
	return version + " (commit " + commit + ", " + runtime.Version() + ")"
}

// buildInfo is fleetwright_build_info{service,version,goversion,commit} = 1, the metric a
// dashboard shows the running build with (as karpenter_build_info).
func buildInfo(service string) prometheus.Collector {
	version, commit := build()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fleetwright_build_info",
		Help:        "1, labelled by the service, its version, the Go version it was built with and its VCS commit.",
		ConstLabels: prometheus.Labels{"service": service, "version": version, "goversion": runtime.Version(), "commit": commit},
	})
	g.Set(1)
	return g
}
