module github.com/fleetwright/fleetwright/services/pod-watcher

go 1.26

replace (
	github.com/fleetwright/fleetwright/pkg => ../../pkg
	github.com/fleetwright/fleetwright/proto => ../../proto
)
