package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/proc"
)

// Local defaults shared by the components and the env file.
const (
	clusterName = "demo-cluster"
	awsemuAddr  = "127.0.0.1:4566"
)

// component is one process of the stack after the control plane and NATS.
type component struct {
	name   string
	args   []string
	env    []string
	health string // URL answering 200 once the component is ready
}

// awsEnv points the AWS SDK at the emulator in region, as a user's shell would.
func awsEnv(region string) []string {
	return []string{
		"AWS_ENDPOINT_URL_EC2=http://" + awsemuAddr,
		"AWS_ENDPOINT_URL_SQS=http://" + awsemuAddr,
		"AWS_ENDPOINT_URL_IAM=http://" + awsemuAddr,
		"AWS_ENDPOINT_URL_SSM=http://" + awsemuAddr,
		"AWS_ENDPOINT_URL_EKS=http://" + awsemuAddr,
		"AWS_ENDPOINT_URL_PRICING=http://" + awsemuAddr,
		"AWS_REGION=" + region,
		"AWS_ACCESS_KEY_ID=fleetwright-local",
		"AWS_SECRET_ACCESS_KEY=fleetwright-local",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// traceEnv sends a service's traces to the stack's Jaeger, as deploy/'s settings.env would.
func traceEnv(cfg config) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + cfg.otlpURL(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}
}

// components lists what runs beside the control plane and NATS, in start order: the AWS
// emulator, then the services (each with its own admin port: 8081…).
func components(cfg config, cluster *localcluster.Cluster) []component {
	out := []component{{
		name: "awsemu",
		args: []string{"--listen", awsemuAddr, "--kubeconfig", cluster.Kubeconfig, "--cluster-name", clusterName,
			"--region", cfg.region, "--boot-delay", cfg.bootDelay.String(), "--service-cidr", localcluster.ServiceCIDR, "--cluster-endpoint", cluster.Server},
		health: "http://" + awsemuAddr + "/_emu/healthz",
	}}
	common := []string{"--kubeconfig", cluster.Kubeconfig, "--nats-url", cfg.natsURL()}
	for _, name := range services {
		admin := "127.0.0.1:" + strconv.Itoa(adminPorts[name])
		args := append(append([]string{}, common...), "--admin-addr", admin)
		switch name {
		case "launcher":
			args = append(args, "--cluster-name", clusterName, "--cluster-endpoint", cluster.Server, "--spot-price-modelled")
		case "terminator":
			args = append(args, "--cluster-name", clusterName, "--interruption-queue", "fleetwright-"+clusterName)
		}
		env := append(awsEnv(cfg.region), "POD_NAMESPACE=fleetwright", "POD_NAME="+name+"-local")
		out = append(out, component{name: name, args: args, env: append(env, traceEnv(cfg)...),
			health: "http://" + admin + "/readyz"})
	}
	return out
}

// services are started when their binary is present next to the stack binary, each ready before
// the next, so each after the owners of the streams it uses (pkg/subject's stream owners): a
// service waits, not ready, until those exist.
var services = []string{"pod-watcher", "launcher", "terminator", "scheduler"}

// adminPorts are the services' admin ports, as docs/development.md gives them (and deploy/).
var adminPorts = map[string]int{"pod-watcher": 8081, "scheduler": 8082, "launcher": 8083, "terminator": 8084}

// startComponents starts each component whose binary exists and waits for its health URL.
func startComponents(ctx context.Context, cfg config, cluster *localcluster.Cluster) ([]*proc.Process, error) {
	if err := prepareCluster(ctx, cluster); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating own binary: %w", err)
	}
	var started []*proc.Process
	for _, c := range components(cfg, cluster) {
		bin := filepath.Join(filepath.Dir(exe), c.name)
		if _, err := os.Stat(bin); err != nil {
			fmt.Printf("stack: %s not built, skipped\n", c.name)
			continue
		}
		p, err := startComponent(cfg, cluster, c.name)
		if p != nil {
			started = append(started, p)
		}
		if err != nil {
			return started, err
		}
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		err = proc.WaitFor(wctx, p, c.name, func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, c.health, "") })
		cancel()
		if err != nil {
			return started, err
		}
		fmt.Printf("stack: %s ready (%s, log %s)\n", c.name, c.health, p.LogPath)
	}
	return started, nil
}

// startComponent starts one component by name (at first, or again after it died); for a
// service it records "<pid> <readiness URL>" in <state>/pids/<name>.pid, which the soak
// (tools/soak) reads to kill it.
func startComponent(cfg config, cluster *localcluster.Cluster, name string) (*proc.Process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating own binary: %w", err)
	}
	for _, c := range components(cfg, cluster) {
		if c.name != name {
			continue
		}
		p, err := proc.Start(c.name, filepath.Join(filepath.Dir(exe), c.name), c.args, c.env, cfg.logDir())
		if err != nil {
			return nil, err
		}
		if slices.Contains(services, name) {
			if err := os.MkdirAll(cfg.pidDir(), 0o755); err != nil {
				return p, fmt.Errorf("creating %s: %w", cfg.pidDir(), err)
			}
			line := strconv.Itoa(p.Pid()) + " " + c.health + "\n"
			if err := os.WriteFile(filepath.Join(cfg.pidDir(), name+".pid"), []byte(line), 0o644); err != nil {
				return p, fmt.Errorf("recording %s's pid: %w", name, err)
			}
		}
		return p, nil
	}
	return nil, fmt.Errorf("no component %q", name)
}

// prepareCluster installs the CRDs and the services' namespace, as the deploy manifests would.
func prepareCluster(ctx context.Context, cluster *localcluster.Cluster) error {
	root, err := proc.RepoRoot()
	if err != nil {
		return err
	}
	kubectl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, cluster.Kubectl(), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %v: %w: %s", args, err, out)
		}
		return nil
	}
	if err := kubectl("apply", "--server-side", "-k", filepath.Join(root, "deploy", "crds")); err != nil {
		return err
	}
	if err := kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all"); err != nil {
		return err
	}
	if err := kubectl("create", "namespace", "fleetwright"); err != nil {
		return err
	}
	fmt.Println("stack: CRDs installed, namespace fleetwright created")
	return nil
}
