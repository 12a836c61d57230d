package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fleetwright/fleetwright/tools/proc"
)

// Jaeger is built from github.com/jaegertracing/jaeger at JaegerModuleVersion (modules/jaeger):
// the module's v1 tag of the release whose binary, cmd/jaeger, is Jaeger JaegerVersion, an
// OpenTelemetry Collector distribution.
const (
	JaegerModuleVersion = "v1.76.0"
	JaegerVersion       = "v2.13.0"
	jaegerBinary        = "jaeger"
)

// JaegerBinDir is the directory holding the Jaeger of the pinned version, beside the control
// plane's binaries in CacheDir (a directory of its own, so pinning another Jaeger rebuilds only it).
func JaegerBinDir() string {
	return filepath.Join(CacheDir(), "jaeger", JaegerVersion, "bin")
}

// EnsureJaeger builds Jaeger into JaegerBinDir unless it is there, printing progress to out as
// EnsureBinaries does, and returns the binary's path. A cold build takes minutes.
func EnsureJaeger(ctx context.Context, out io.Writer) (string, error) {
	return ensureOne(ctx, JaegerBinDir(), binary{jaegerBinary, "jaeger", "github.com/jaegertracing/jaeger/cmd/jaeger"}, out)
}

// ensureOne builds b into dir unless it is there, under dir's parent's build lock (a concurrent
// caller waits and then finds it built), and returns the binary's path.
func ensureOne(ctx context.Context, dir string, b binary, out io.Writer) (string, error) {
	target := filepath.Join(dir, b.name)
	if fileExists(target) {
		return target, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating binary directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(filepath.Dir(dir), "build.lock"), out)
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(target) { // built by the process we waited for
		return target, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	if err := build(ctx, filepath.Join(root, b.module), b, target, out); err != nil {
		return "", err
	}
	return target, nil
}

// JaegerOptions configure StartJaeger.
type JaegerOptions struct {
	// Dir holds the config file; the log goes to Dir/logs/jaeger.log.
	Dir string
	// Out receives progress lines (building, ready). Nil discards them.
	Out io.Writer
	// QueryPort pins the port of the UI and HTTP API, OTLPPort the OTLP/HTTP receiver's; 0
	// picks a free one.
	QueryPort, OTLPPort int
}

// Jaeger is a running Jaeger: OTLP/HTTP in, traces kept in memory, the UI and its HTTP API
// (/api/traces, /api/v3/traces) out, all on 127.0.0.1.
type Jaeger struct {
	*proc.Process
	// URL is the UI's and API's base URL: http://127.0.0.1:<query port>.
	URL string
	// OTLPEndpoint is the OTLP/HTTP base URL, the value of OTEL_EXPORTER_OTLP_ENDPOINT.
	OTLPEndpoint string
}

// StartJaeger builds Jaeger if needed, starts it and waits until its API answers and both ports
// are its own. A port picked free but taken before Jaeger binds it is picked again.
func StartJaeger(ctx context.Context, opts JaegerOptions) (*Jaeger, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	bin, err := EnsureJaeger(ctx, out)
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("starting jaeger: JaegerOptions.Dir is required")
	}
	logDir := filepath.Join(opts.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", logDir, err)
	}
	for try := 1; ; try++ {
		query, otlp := opts.QueryPort, opts.OTLPPort
		free, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		if query == 0 {
			query = free[0]
		}
		if otlp == 0 {
			otlp = free[1]
		}
		j, err := startJaeger(ctx, bin, opts.Dir, logDir, query, otlp)
		if err == nil {
			fmt.Fprintf(out, "localcluster: jaeger %s ready at %s (OTLP/HTTP %s)\n", JaegerVersion, j.URL, j.OTLPEndpoint)
			return j, nil
		}
		pinned := opts.QueryPort != 0 && opts.OTLPPort != 0
		if pinned || try == 3 || ctx.Err() != nil || j == nil || j.Running() {
			if j != nil {
				_ = j.Stop(5 * time.Second)
			}
			return nil, err
		}
		fmt.Fprintf(out, "localcluster: jaeger exited before it was ready (%v); starting it again on other ports\n", err)
	}
}

func startJaeger(ctx context.Context, bin, dir, logDir string, query, otlp int) (*Jaeger, error) {
	config := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(config, JaegerConfig(query, otlp), 0o644); err != nil {
		return nil, fmt.Errorf("writing jaeger config: %w", err)
	}
	p, err := proc.Start(jaegerBinary, bin, []string{"--config", "file:" + config}, nil, logDir)
	if err != nil {
		return nil, err
	}
	j := &Jaeger{Process: p, URL: "http://127.0.0.1:" + strconv.Itoa(query), OTLPEndpoint: "http://127.0.0.1:" + strconv.Itoa(otlp)}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = proc.WaitFor(wctx, p, "jaeger", proc.ServedBy(p, query, func(ctx context.Context) error {
		if err := proc.HTTPOK(ctx, nil, j.URL+"/api/services", ""); err != nil {
			return err
		}
		// The collector starts its receivers after its extensions (the query API).
		if ours, err := p.Listens(otlp); err != nil || !ours {
			return fmt.Errorf("jaeger does not listen on its OTLP port %d yet (%v)", otlp, err)
		}
		return nil
	}))
	return j, err
}

// JaegerConfig is the smallest Jaeger v2 configuration the stack needs: one pipeline from an
// OTLP/HTTP receiver to in-memory storage, and the query extension serving the UI and HTTP API
// from it. Everything listens on 127.0.0.1: the query's gRPC API on a port the kernel picks,
// nothing else (no gRPC receiver, no sampling, no health or metrics endpoint), and Jaeger
// traces nothing of its own.
func JaegerConfig(queryPort, otlpPort int) []byte {
	return fmt.Appendf(nil, `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:0
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, queryPort, otlpPort)
}
