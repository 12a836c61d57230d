package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

// options are the settings every command shares: where NATS and Kubernetes are, and how to
// print.
type options struct {
	// NATS: the services' flags and environment variables (service.NATSOptions): --nats-url,
	// --nats-user (+ NATS_PASSWORD, never a flag, or --nats-password-file), --nats-creds,
	// --nats-ca, --nats-cert, --nats-key, --nats-tls-server-name.
	service.NATSOptions
	prefix      string
	kubeconfig  string
	kubeContext string
	output      string
	jaegerURL   string
	timeout     time.Duration
}

// environ looks a setting up in the process environment, then in the local stack's env file.
type environ func(key string) string

// localEnv is the environment with .local/env (written by `make up`: export KEY=VALUE lines)
// as a fallback: $FLEETWRIGHT_STATE/env if set, else the first .local/env found from the
// working directory upwards. A missing file is no error; the stack is not always local.
func localEnv() environ {
	file := map[string]string{}
	path := ""
	if dir := os.Getenv("FLEETWRIGHT_STATE"); dir != "" {
		path = filepath.Join(dir, "env")
	} else if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, ".local", "env")); err == nil {
				path = filepath.Join(dir, ".local", "env")
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if path != "" {
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
				if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
					file[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
				}
			}
			_ = f.Close()
		}
	}
	return func(key string) string {
		if v := os.Getenv(key); v != "" {
			return v
		}
		return file[key]
	}
}

func (e environ) or(key, fallback string) string {
	if v := e(key); v != "" {
		return v
	}
	return fallback
}

// newFlagSet makes a command's flag set with the shared options on it.
func newFlagSet(name string, o *options, stderr io.Writer) *flag.FlagSet {
	env := localEnv()
	*o = options{}
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.RegisterNATS(fs, service.LookupWith(env), "nats://127.0.0.1:4222")
	fs.StringVar(&o.prefix, "prefix", env.or("FLEETWRIGHT_PREFIX", string(subject.DefaultPrefix)), "subject prefix (env FLEETWRIGHT_PREFIX)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", env("KUBECONFIG"), "kubeconfig file (env KUBECONFIG; default ~/.kube/config)")
	fs.StringVar(&o.kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&o.output, "o", "text", "output: text (for people) or json (for scripts)")
	fs.StringVar(&o.jaegerURL, "jaeger-url", env("JAEGER_URL"), "Jaeger UI base `URL`, to print a link to each trace (env JAEGER_URL)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for NATS, Kubernetes and the scheduler")
	return fs
}

// parse parses flags and positional arguments in any order (`why node X -o json`). The old
// names of renamed flags (--tls-ca, --creds, --tls-server-name) are accepted.
func parse(fs *flag.FlagSet, o *options, args []string) ([]string, error) {
	service.AddAliases(fs)
	fs.Usage = service.Usage(fs, fs.Name())
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if o.output != "text" && o.output != "json" {
		return nil, usagef("-o %s: want text or json", o.output)
	}
	if _, err := subject.ParsePrefix(o.prefix); err != nil {
		return nil, usageError{err.Error()}
	}
	return pos, nil
}

// connect dials NATS with the options.
func (o *options) connect(ctx context.Context) (*bus.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := o.ValidateNATS(); err != nil {
		return nil, err
	}
	cfg := o.BusConfig()
	cfg.Name, cfg.Prefix, cfg.Registerer, cfg.DrainTimeout = "fleetwright-cli", o.prefix, prometheus.NewRegistry(), 2*time.Second
	return bus.Connect(cctx, cfg)
}

// kube is a client for the cluster the kubeconfig names, knowing Karpenter's types.
func (o *options) kube() (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = o.timeout
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := karpv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to kubernetes at %s: %w", cfg.Host, err)
	}
	return c, nil
}

// traceURL links a trace id to Jaeger's UI, when --jaeger-url is given.
func (o *options) traceURL(traceID string) string {
	if o.jaegerURL == "" || traceID == "" {
		return ""
	}
	return strings.TrimRight(o.jaegerURL, "/") + "/trace/" + traceID
}

// printJSON writes v indented, for -o json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
