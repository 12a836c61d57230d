module github.com/fleetwright/fleetwright/proto

go 1.26

require google.golang.org/protobuf v1.36.12
