package service

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is fleetwright_build_info{service,version,goversion,commit} = 1, the metric a
// dashboard shows the running build with (as karpenter_build_info). version is Version when
// set at build time, else the module's version if the binary was built from one; commit is
// the VCS revision the Go toolchain stamped, "unknown" without one.
func buildInfo(service string) prometheus.Collector {
	version, commit := Version, "unknown"
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
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fleetwright_build_info",
		Help:        "1, labelled by the service, its version, the Go version it was built with and its VCS commit.",
		ConstLabels: prometheus.Labels{"service": service, "version": version, "goversion": runtime.Version(), "commit": commit},
	})
	g.Set(1)
	return g
}
