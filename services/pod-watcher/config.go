package main

import (
	"errors"
	"flag"
	"os"
	"time"

	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/service"
)

type config struct {
	service.Common
	BatchIdle time.Duration
	BatchMax  time.Duration
	Resync    time.Duration
	WatcherID string
	// Nomination bounds how long a pod nominated to a NodeClaim is left to kube-scheduler.
	Nomination podproj.NominationRule
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("pod-watcher", flag.ContinueOnError)
	f := c.Register(fs, "127.0.0.1:8081")
	f.Duration(&c.BatchIdle, "batch-idle", "BATCH_IDLE_DURATION", time.Second, "close a batch after this long without a new pod")
	f.Duration(&c.BatchMax, "batch-max", "BATCH_MAX_DURATION", 10*time.Second, "close a batch this long after it opened")
	f.Duration(&c.Resync, "resync", "RESYNC_PERIOD", 30*time.Second, "offer still-pending pods again this often")
	c.Nomination.RegisterFlags(fs, service.EnvDuration)
	host, _ := os.Hostname()
	f.String(&c.WatcherID, "watcher-id", "POD_NAME", host, "this replica's name in batches")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var errs []error
	if c.BatchIdle <= 0 || c.BatchMax <= 0 {
		errs = append(errs, errors.New("--batch-idle and --batch-max must be positive"))
	}
	if c.BatchIdle > c.BatchMax {
		errs = append(errs, errors.New("--batch-idle must not exceed --batch-max"))
	}
	if err := c.Nomination.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Resync < c.BatchMax {
		errs = append(errs, errors.New("--resync must be at least --batch-max"))
	}
	return c, errors.Join(errs...)
}
