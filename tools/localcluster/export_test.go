package localcluster

// SetFreePorts replaces how Start picks ports, for a test; the returned func restores it.
func SetFreePorts(pick func(n int, kernel func(int) ([]int, error)) ([]int, error)) (restore func()) {
	freePorts = func(n int) ([]int, error) { return pick(n, kernelFreePorts) }
	return func() { freePorts = kernelFreePorts }
}
