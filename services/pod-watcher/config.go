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
	// Early lets a pod kube-scheduler has not tried yet count as pending once old enough.
	Early podproj.EarlyRule
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("pod-watcher", flag.ContinueOnError)
	c.Register(fs, "127.0.0.1:8081")
	fs.DurationVar(&c.BatchIdle, "batch-idle-duration", service.EnvDuration("BATCH_IDLE_DURATION", time.Second), "close a batch after this long without a new pod (env BATCH_IDLE_DURATION)")
	fs.DurationVar(&c.BatchMax, "batch-max-duration", service.EnvDuration("BATCH_MAX_DURATION", 10*time.Second), "close a batch this long after it opened (env BATCH_MAX_DURATION)")
	fs.DurationVar(&c.Resync, "resync-period", service.EnvDuration("RESYNC_PERIOD", 30*time.Second), "offer still-pending pods again this often (env RESYNC_PERIOD)")
	c.Nomination.RegisterFlags(fs, service.EnvDuration)
	c.Early.RegisterFlags(fs, service.EnvDuration)
	host, _ := os.Hostname()
	fs.StringVar(&c.WatcherID, "pod-name", service.Env("POD_NAME", host), "this replica's name in batches (env POD_NAME)")
	if err := c.Parse(fs, args); err != nil {
		return c, err
	}
	var errs []error
	if c.BatchIdle <= 0 || c.BatchMax <= 0 {
		errs = append(errs, errors.New("--batch-idle-duration and --batch-max-duration must be positive"))
	}
	if c.BatchIdle > c.BatchMax {
		errs = append(errs, errors.New("--batch-idle-duration must not exceed --batch-max-duration"))
	}
	if err := c.Nomination.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Early.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Resync < c.BatchMax {
		errs = append(errs, errors.New("--resync-period must be at least --batch-max-duration"))
	}
	return c, errors.Join(errs...)
}
