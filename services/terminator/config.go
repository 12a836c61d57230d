package main

import (
	"errors"
	"flag"
	"time"

	"github.com/fleetwright/fleetwright/pkg/service"
)

type config struct {
	service.Common
	ClusterName       string
	InterruptionQueue string
	Region            string
	Workers           int
	UrgentWorkers     int
	Interval          time.Duration
	IntentAckWait     time.Duration
	DrainSlice        time.Duration
	SQSWait           time.Duration
	RegistrationTTL   time.Duration
	GCInterval        time.Duration
	GCGrace           time.Duration
	ResumeAfter       time.Duration
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("terminator", flag.ContinueOnError)
	c.Register(fs, "127.0.0.1:8084")
	fs.StringVar(&c.ClusterName, "cluster-name", service.Env("CLUSTER_NAME", ""), "EKS cluster name (env CLUSTER_NAME)")
	fs.StringVar(&c.InterruptionQueue, "interruption-queue", service.Env("INTERRUPTION_QUEUE", ""),
		"SQS interruption queue name or URL; default fleetwright-<cluster name>, as deploy/aws/fleetwright.yaml names it; \"-\" disables interruption handling (env INTERRUPTION_QUEUE)")
	fs.StringVar(&c.Region, "region", service.Env("AWS_REGION", "us-east-1"), "AWS region (env AWS_REGION)")
	fs.IntVar(&c.Workers, "termination-workers", service.EnvInt("TERMINATION_WORKERS", 4), "terminations in flight per replica (env TERMINATION_WORKERS)")
	fs.IntVar(&c.UrgentWorkers, "urgent-termination-workers", service.EnvInt("URGENT_TERMINATION_WORKERS", 2),
		"interruptions in flight per replica, on a consumer of their own so no drain held by a PodDisruptionBudget delays them (env URGENT_TERMINATION_WORKERS)")
	fs.DurationVar(&c.Interval, "decision-interval", service.EnvDuration("DECISION_INTERVAL", 30*time.Second),
		"registration timeouts and the NodeClaims and Nodes being deleted are looked at on every change of nodes and NodeClaims, and when a deadline they know of ends; "+
			"this is how often they also are regardless, for what no change announces (a stalled termination to publish again) (env DECISION_INTERVAL)")
	fs.DurationVar(&c.IntentAckWait, "intent-ack-wait", service.EnvDuration("INTENT_ACK_WAIT", 5*time.Second),
		"a termination intent whose worker died (stopped sending heartbeats) is redelivered this long after (env INTENT_ACK_WAIT)")
	fs.DurationVar(&c.DrainSlice, "drain-slice", service.EnvDuration("DRAIN_SLICE", 30*time.Second),
		"one delivery of a termination intent works this long; a longer drain continues on the redelivery (env DRAIN_SLICE)")
	fs.DurationVar(&c.RegistrationTTL, "registration-ttl", service.EnvDuration("REGISTRATION_TTL", 15*time.Minute),
		"terminate a launched instance whose node has not registered by then, and delete its NodeClaim (env REGISTRATION_TTL)")
	fs.DurationVar(&c.GCInterval, "gc-interval", service.EnvDuration("GC_INTERVAL", time.Minute), "how often to look for instances no NodeClaim owns (env GC_INTERVAL)")
	fs.DurationVar(&c.GCGrace, "gc-grace", service.EnvDuration("GC_GRACE", 2*time.Minute),
		"an instance younger than this is never garbage-collected: its claim may be about to record it (env GC_GRACE)")
	fs.DurationVar(&c.ResumeAfter, "resume-after", service.EnvDuration("RESUME_AFTER", 5*time.Minute),
		"a deleting NodeClaim whose termination shows no progress this long (its intent aged out of the stream, was dead-lettered or purged) is published again (env RESUME_AFTER)")
	fs.DurationVar(&c.SQSWait, "sqs-wait", service.EnvDuration("SQS_WAIT", 20*time.Second), "SQS long-poll wait, at most 20s (env SQS_WAIT)")
	if err := c.Parse(fs, args); err != nil {
		return c, err
	}
	if c.InterruptionQueue == "" {
		c.InterruptionQueue = "fleetwright-" + c.ClusterName
	}
	var errs []error
	if c.ClusterName == "" {
		errs = append(errs, errors.New("--cluster-name is required"))
	}
	if c.Workers < 1 {
		errs = append(errs, errors.New("--termination-workers must be at least 1"))
	}
	if c.UrgentWorkers < 1 {
		errs = append(errs, errors.New("--urgent-termination-workers must be at least 1"))
	}
	if c.Interval <= 0 {
		errs = append(errs, errors.New("--decision-interval must be positive"))
	}
	if c.IntentAckWait < time.Second {
		errs = append(errs, errors.New("--intent-ack-wait must be at least 1s"))
	}
	if c.DrainSlice < 10*time.Second {
		errs = append(errs, errors.New("--drain-slice must be at least 10s"))
	}
	if c.ResumeAfter < time.Second {
		errs = append(errs, errors.New("--resume-after must be at least 1s"))
	}
	if c.SQSWait < 0 || c.SQSWait > 20*time.Second {
		errs = append(errs, errors.New("--sqs-wait must be between 0 and 20s"))
	}
	return c, errors.Join(errs...)
}
