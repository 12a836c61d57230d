package main

// Event reasons the launcher records on NodeClaims and Nodes (kubectl describe, kubectl events).
const (
	reasonLaunched          = "Launched"
	reasonRegistered        = "Registered"
	reasonInitialized       = "Initialized"
	reasonInsufficientCap   = "InsufficientCapacityError"
	reasonNodeClassNotReady = "NodeClassNotReady"
	reasonFailedLaunch      = "FailedLaunch"
	reasonDrifted           = "Drifted" // the claim no longer matches its NodePool or node class
)

// failureReason is the event reason of a launch that failed for good.
func failureReason(code string) string {
	switch code {
	case "InsufficientCapacity":
		return reasonInsufficientCap
	case "NodeClassNotFound", "NodeClassInvalid":
		return reasonNodeClassNotReady
	}
	return reasonFailedLaunch
}
