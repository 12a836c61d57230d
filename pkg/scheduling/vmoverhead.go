package scheduling

import (
	"errors"
	"flag"
)

// VMOverheadFlag registers the one setting of the memory share the hypervisor keeps
// (--vm-memory-overhead-percent, env VM_MEMORY_OVERHEAD_PERCENT, default VMMemoryOverhead):
// the scheduler plans every instance type's memory with it and the launcher writes a launched
// NodeClaim's status.allocatable with it, so the two never disagree. env reads the variable
// (service.EnvFloat).
func VMOverheadFlag(fs *flag.FlagSet, v *float64, env func(key string, def float64) float64) {
	fs.Float64Var(v, "vm-memory-overhead-percent", env("VM_MEMORY_OVERHEAD_PERCENT", VMMemoryOverhead),
		"share of an instance's memory the hypervisor and kernel keep, as a fraction: 0.075 is 7.5% (env VM_MEMORY_OVERHEAD_PERCENT)")
}

// ValidVMOverhead checks the setting VMOverheadFlag registers.
func ValidVMOverhead(v float64) error {
	if v < 0 || v >= 1 {
		return errors.New("--vm-memory-overhead-percent must be a fraction from 0 to below 1 (0.075 is 7.5%)")
	}
	return nil
}
