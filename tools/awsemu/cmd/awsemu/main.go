// Command awsemu serves the AWS emulator (EC2 and IAM query protocols, SQS JSON protocol and the /_emu/
// admin API) on a loopback address. Every flag has an environment fallback (AWSEMU_<FLAG>).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetwright/fleetwright/tools/awsemu"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "awsemu:", err)
		os.Exit(1)
	}
}

type config struct {
	listen     string
	kubeconfig string
	emu        awsemu.Config
}

func env(name, def string) string {
	if v, ok := os.LookupEnv("AWSEMU_" + name); ok {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(env(name, "")); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(env(name, "")); err == nil {
		return n
	}
	return def
}

func parseConfig(args []string) (config, error) {
	var c config
	var zones string
	fs := flag.NewFlagSet("awsemu", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", env("LISTEN", "127.0.0.1:4566"), "loopback host:port to serve on (AWSEMU_LISTEN)")
	fs.StringVar(&c.emu.Region, "region", env("REGION", "us-east-1"), "region (AWSEMU_REGION)")
	fs.StringVar(&zones, "zones", env("ZONES", ""), "comma-separated zones, default <region>a,b,c (AWSEMU_ZONES)")
	fs.StringVar(&c.emu.AccountID, "account-id", env("ACCOUNT_ID", "123456789012"), "account id (AWSEMU_ACCOUNT_ID)")
	fs.StringVar(&c.emu.ClusterName, "cluster-name", env("CLUSTER_NAME", "demo-cluster"), "cluster name for karpenter.sh/discovery tags (AWSEMU_CLUSTER_NAME)")
	fs.StringVar(&c.emu.ServiceCIDR, "service-cidr", env("SERVICE_CIDR", "10.100.0.0/16"), "the cluster's service CIDR, as EKS DescribeCluster reports it (AWSEMU_SERVICE_CIDR)")
	fs.StringVar(&c.emu.ClusterEndpoint, "cluster-endpoint", env("CLUSTER_ENDPOINT", ""), "the cluster's API server URL, as EKS DescribeCluster reports it (AWSEMU_CLUSTER_ENDPOINT)")
	fs.StringVar(&c.emu.InterruptionQueue, "interruption-queue", env("INTERRUPTION_QUEUE", ""), "SQS queue for interruption events, default fleetwright-<cluster name> (AWSEMU_INTERRUPTION_QUEUE)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "kubeconfig for node registration; empty = no nodes (AWSEMU_KUBECONFIG)")
	fs.DurationVar(&c.emu.BootDelay, "boot-delay", envDuration("BOOT_DELAY", 5*time.Second), "pending → running; 0 for none (AWSEMU_BOOT_DELAY)")
	fs.DurationVar(&c.emu.DescribeDelay, "describe-delay", envDuration("DESCRIBE_DELAY", 0),
		"an instance, and a change of its tags, shows in DescribeInstances this long after it exists, as EC2 is eventually consistent; 0 for at once (AWSEMU_DESCRIBE_DELAY)")
	fs.DurationVar(&c.emu.SpotNotice, "spot-notice", envDuration("SPOT_NOTICE", 2*time.Minute), "spot interruption warning → termination (AWSEMU_SPOT_NOTICE)")
	fs.IntVar(&c.emu.PoolCapacity, "pool-capacity", envInt("POOL_CAPACITY", 100), "instances per type × zone × capacity type (AWSEMU_POOL_CAPACITY)")
	fs.BoolVar(&c.emu.SteadySpotPrices, "steady-spot-prices", env("STEADY_SPOT_PRICES", "") == "true",
		"hold each spot price at one value of the model instead of moving it every hour (AWSEMU_STEADY_SPOT_PRICES)")
	seed := fs.Int64("seed", int64(envInt("SEED", 1)), "seed for IDs and addresses (AWSEMU_SEED)")
	roles := fs.String("roles", env("ROLES", ""), "comma-separated IAM roles that exist at start, default KarpenterNodeRole-<cluster> (AWSEMU_ROLES)")
	profiles := fs.String("instance-profiles", env("INSTANCE_PROFILES", ""),
		"comma-separated IAM instance profiles that exist at start, each name[=role], default KarpenterNodeInstanceProfile-<cluster>=KarpenterNodeRole-<cluster> (AWSEMU_INSTANCE_PROFILES)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.emu.Seed = *seed
	if c.emu.BootDelay == 0 {
		c.emu.BootDelay = awsemu.NoDelay // in Config, zero would mean the default
	}
	if zones != "" {
		c.emu.Zones = strings.Split(zones, ",")
	}
	if *roles != "" {
		c.emu.Roles = strings.Split(*roles, ",")
	}
	if *profiles != "" {
		c.emu.InstanceProfiles = map[string]string{}
		for _, p := range strings.Split(*profiles, ",") {
			name, role, _ := strings.Cut(p, "=")
			c.emu.InstanceProfiles[name] = role
		}
	}
	host, _, err := net.SplitHostPort(c.listen)
	if err != nil {
		return c, fmt.Errorf("parsing --listen: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return c, fmt.Errorf("--listen %s is not a loopback address", c.listen)
	}
	return c, nil
}

func run() error {
	cfg, err := parseConfig(os.Args[1:])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.kubeconfig != "" {
		reg, err := awsemu.NewRegistrarFromKubeconfig(cfg.kubeconfig)
		if err != nil {
			return err
		}
		cfg.emu.Registrar = reg
		go reg.Run(ctx)
	}
	emu, err := awsemu.New(cfg.emu)
	if err != nil {
		return err
	}
	go emu.Run(ctx)
	srv := &http.Server{Addr: cfg.listen, Handler: emu, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.listen, err)
	}
	c := emu.Config()
	log.Printf("awsemu: serving EC2, SQS and IAM on http://%s (region %s, zones %s, cluster %s, queue %s, nodes %t); spot prices are modelled: %s",
		ln.Addr(), c.Region, strings.Join(c.Zones, ","), c.ClusterName, c.InterruptionQueue, cfg.kubeconfig != "", "see README")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
