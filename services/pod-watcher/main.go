// Command pod-watcher is one of Fleetwright's four services; see the README for its place in the flow.
package main

func main() {}
