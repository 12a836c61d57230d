// Command imagebuild builds Fleetwright's container images without a container engine: each
// service is compiled with the Go toolchain once per platform (static, CGO_ENABLED=0), put on
// an image built from scratch, and the platforms are joined in one OCI image index.
//
//	go build (GOOS/GOARCH per --platforms) ──> /usr/local/bin/<service>     layer 2
//	nonroot user 65532, CA bundle, /tmp    ──> /etc/passwd, /etc/ssl/...     layer 1 (shared)
//	config: entrypoint, user, OCI labels   ──> one image per platform ──> an index
//	    ──> --registry: pushed as <registry>/<service>:<version>
//	    ──> else:       <oci-dir>/<service>.tar, an OCI image layout in a tar (oci-archive)
//
// No base image is pulled: there is nothing to pull it from where Fleetwright is built, and a
// static Go binary needs only the files layer 1 holds. The CA bundle is Mozilla's, from the Go
// module golang.org/x/crypto/x509roots/fallback at the version go.mod pins, so the same
// commit gives the same bundle on every machine (the building machine's /etc/ssl/certs would
// not).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "imagebuild: %v\n", err)
		os.Exit(1)
	}
}

// options are imagebuild's flags.
type options struct {
	Root      string // the repository: where go build runs
	Registry  string // push to <Registry>/<service>:<Version>; empty: write OCI archives
	OCIDir    string // where the OCI archives go
	Version   string // stamped into the binaries and the tags
	Revision  string // the commit, for the OCI label
	Created   time.Time
	Platforms []platform
	Services  []string
}

func parseOptions(args []string, out io.Writer) (options, error) {
	var o options
	var platforms, created string
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.Root, "root", ".", "the repository's root, where `go build` runs")
	fs.StringVar(&o.Registry, "registry", os.Getenv("REGISTRY"), "push the images to REGISTRY/<service>:<version> (env REGISTRY; credentials as docker login leaves them)")
	fs.StringVar(&o.OCIDir, "oci-dir", "", "write each image as an OCI archive DIR/<service>.tar (the default without --registry: .local/images)")
	fs.StringVar(&o.Version, "version", "", "version stamped into the binaries (pkg/service.Version) and the image tag (default: git describe)")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH list")
	fs.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "image creation time, Unix seconds (env SOURCE_DATE_EPOCH; default: the commit's time, so a commit always gives the same images)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: imagebuild [flags] SERVICE...   (each a directory under services/)\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Services = fs.Args()
	if len(o.Services) == 0 {
		return o, errors.New("name at least one service (a directory under services/)")
	}
	for _, s := range o.Services {
		if _, err := os.Stat(fmt.Sprintf("%s/services/%s/main.go", o.Root, s)); err != nil {
			return o, fmt.Errorf("service %q: no services/%s/main.go under %s", s, s, o.Root)
		}
	}
	var err error
	if o.Platforms, err = parsePlatforms(platforms); err != nil {
		return o, err
	}
	if o.Registry != "" && o.OCIDir != "" {
		return o, errors.New("--registry and --oci-dir: give one (push, or write archives)")
	}
	if o.Registry == "" && o.OCIDir == "" {
		o.OCIDir = o.Root + "/.local/images"
	}
	o.Registry = strings.TrimSuffix(o.Registry, "/")
	if o.Version == "" {
		o.Version = gitOutput(o.Root, "dev", "describe", "--tags", "--always", "--dirty")
	}
	o.Revision = gitOutput(o.Root, "unknown", "rev-parse", "HEAD")
	if created == "" {
		created = gitOutput(o.Root, "0", "log", "-1", "--format=%ct")
	}
	secs, err := parseUnix(created)
	if err != nil {
		return o, fmt.Errorf("--created %q: %w", created, err)
	}
	o.Created = time.Unix(secs, 0).UTC()
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseOptions(args, out)
	if err != nil {
		return err
	}
	start := time.Now()
	work, err := os.MkdirTemp("", "imagebuild-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bins, err := compile(ctx, o, work)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "imagebuild: compiled %d service(s) for %d platform(s) in %s\n", len(o.Services), len(o.Platforms), time.Since(start).Round(100*time.Millisecond))
	base, err := baseLayer(work, o.Created)
	if err != nil {
		return err
	}
	for _, svc := range o.Services {
		idx, err := serviceIndex(o, svc, base, bins, work)
		if err != nil {
			return fmt.Errorf("%s: %w", svc, err)
		}
		where, err := publish(ctx, o, svc, idx, work)
		if err != nil {
			return fmt.Errorf("%s: %w", svc, err)
		}
		d, _ := idx.Digest()
		size := indexSize(idx)
		fmt.Fprintf(out, "%-12s %s  %s  %d platforms, %.1f MiB compressed\n", svc, where, d, len(o.Platforms), float64(size)/(1<<20))
	}
	fmt.Fprintf(out, "imagebuild: %d image(s), version %s, in %s\n", len(o.Services), o.Version, time.Since(start).Round(100*time.Millisecond))
	return nil
}
