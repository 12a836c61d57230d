package deploytest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/localcluster"
)

func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	dir := root(t)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "docker-compose.yaml")},
		cli.WithWorkingDirectory(dir), cli.WithName("fleetwright"), cli.WithResolvedPaths(true))
	require.NoError(t, err)
	p, err := opts.LoadProject(context.Background())
	require.NoError(t, err, "docker-compose.yaml is a valid compose file")
	return p
}

// TestComposeIsValidAndComplete loads docker-compose.yaml the way docker compose does (schema
// validation, interpolation, anchors) and checks the stack is whole: NATS with JetStream,
// Jaeger taking OTLP, the emulator, and the four services, each built from a main package by
// the shared Dockerfile, running non-root on a read-only root, tracing to Jaeger.
func TestComposeIsValidAndComplete(t *testing.T) {
	p := loadCompose(t)
	require.ElementsMatch(t, []string{"nats", "jaeger", "awsemu", "pod-watcher", "scheduler", "launcher", "terminator"}, p.ServiceNames())

	nats := p.Services["nats"]
	require.Contains(t, nats.Command, "--jetstream")
	require.NotNil(t, nats.HealthCheck)
	// The Jaeger make up builds (localcluster.JaegerVersion), whose image takes OTLP as it is.
	require.Equal(t, "jaegertracing/jaeger:"+strings.TrimPrefix(localcluster.JaegerVersion, "v"), p.Services["jaeger"].Image)

	for _, name := range append([]string{"awsemu"}, services...) {
		s := p.Services[name]
		require.NotNil(t, s.Build, name)
		dockerfile := s.Build.Dockerfile
		if !filepath.IsAbs(dockerfile) {
			dockerfile = filepath.Join(s.Build.Context, dockerfile)
		}
		b, err := os.ReadFile(dockerfile)
		require.NoError(t, err, name)
		require.Contains(t, string(b), "CGO_ENABLED=0", "static binary")
		require.Contains(t, string(b), "distroless/static", "distroless base")
		cmd := s.Build.Args["CMD"]
		require.NotNil(t, cmd, name)
		main, err := os.ReadFile(filepath.Join(root(t), *cmd, "main.go"))
		require.NoError(t, err, "%s builds %s, a main package", name, *cmd)
		require.Contains(t, string(main), "package main")
		require.Equal(t, "65532:65532", s.User, "%s runs non-root", name)
		require.True(t, s.ReadOnly, "%s has a read-only root filesystem", name)
	}
	for _, name := range services {
		s := p.Services[name]
		require.Equal(t, "nats://nats:4222", *s.Environment["NATS_URL"], name)
		require.Equal(t, "http://jaeger:4318", *s.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"], name)
		require.NotEmpty(t, *s.Environment["ADMIN_ADDR"], name)
		require.Contains(t, s.DependsOn, "nats", name)
	}
	// The emulator listens on loopback only: whoever calls AWS shares its network namespace.
	for _, name := range []string{"launcher", "terminator"} {
		s := p.Services[name]
		require.Equal(t, "service:awsemu", s.NetworkMode, name)
		require.True(t, strings.HasPrefix(*s.Environment["AWS_ENDPOINT_URL_EC2"], "http://127.0.0.1:4566"), name)
		require.True(t, strings.HasPrefix(*s.Environment["AWS_ENDPOINT_URL_SSM"], "http://127.0.0.1:4566"), name+": AMI aliases resolve through SSM")
	}
	// Nothing in the stack authenticates (NATS, its monitoring, Jaeger, the admin ports): every
	// published port is on the host's loopback only.
	published := 0
	for name, s := range p.Services {
		for _, port := range s.Ports {
			published++
			require.Equal(t, "127.0.0.1", port.HostIP, "%s publishes %s on every interface", name, port.Published)
		}
	}
	require.NotZero(t, published)
	require.Contains(t, p.Services["launcher"].Command, "--cluster-name")
	require.Contains(t, p.Services["terminator"].Command, "--interruption-queue")
}
