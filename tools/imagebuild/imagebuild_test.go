package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// services are the four images make images builds.
var services = []string{"pod-watcher", "scheduler", "launcher", "terminator"}

const testVersion = "v0.0.0-imagetest"

// buildArgs builds every service for both platforms, at a fixed creation time.
func buildArgs(extra ...string) []string {
	return append([]string{"--root", "../..", "--version", testVersion, "--created", "1700000000", "--platforms", "linux/amd64,linux/arm64"},
		append(extra, services...)...)
}

// TestImagesHoldARunnableBinaryPerPlatform builds the four images as make test does, into OCI
// archives, and opens each as a runtime would: an index with linux/amd64 and linux/arm64; each
// platform's image runs its service's static binary for that architecture as user 65532, with
// Mozilla's CA bundle and the OCI labels; and the binary for this machine's architecture,
// extracted and run, answers --help and --version with the version stamped in.
func TestImagesHoldARunnableBinaryPerPlatform(t *testing.T) {
	dir := built(t)

	for _, svc := range services {
		t.Run(svc, func(t *testing.T) {
			idx := openArchive(t, filepath.Join(dir, svc+".tar"))
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if got := im.Annotations["org.opencontainers.image.version"]; got != testVersion {
				t.Errorf("index version label %q, want %q", got, testVersion)
			}
			platforms := map[string]bool{}
			for _, d := range im.Manifests {
				if d.Platform == nil {
					t.Fatalf("manifest %s has no platform", d.Digest)
				}
				p := d.Platform.OS + "/" + d.Platform.Architecture
				platforms[p] = true
				img, err := idx.Image(d.Digest)
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, svc, d.Platform.Architecture, img)
			}
			if len(platforms) != 2 || !platforms["linux/amd64"] || !platforms["linux/arm64"] {
				t.Errorf("platforms %v, want linux/amd64 and linux/arm64", platforms)
			}
		})
	}
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// built builds the four images into OCI archives once for the package's tests, and returns
// their directory.
func built(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "imagebuild-test-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		var out bytes.Buffer
		start := time.Now()
		if buildErr = run(ctx, buildArgs("--oci-dir", buildDir), &out); buildErr != nil {
			buildErr = fmt.Errorf("%w\n%s", buildErr, out.String())
			return
		}
		fmt.Printf("imagebuild: built in %s:\n%s", time.Since(start).Round(time.Second), out.String())
	})
	if buildErr != nil {
		t.Fatalf("imagebuild: %v", buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// openArchive reads an OCI archive (an image layout in a tar) as its single index.
func openArchive(t *testing.T, path string) v1.ImageIndex {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the archive: %v", err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations[RefName] != testVersion {
		t.Fatalf("index.json: want one index named %s, got %+v", testVersion, tm.Manifests)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// checkImage checks one platform's image: its configuration, its files, its binary.
func checkImage(t *testing.T, svc, arch string, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != arch || cf.OS != "linux" {
		t.Errorf("%s: config says %s/%s", arch, cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532 (non-root)", arch, cf.Config.User)
	}
	if want := []string{"/usr/local/bin/" + svc}; fmt.Sprint(cf.Config.Entrypoint) != fmt.Sprint(want) {
		t.Errorf("%s: entrypoint %v, want %v", arch, cf.Config.Entrypoint, want)
	}
	for k, want := range map[string]string{"org.opencontainers.image.title": svc, "org.opencontainers.image.version": testVersion,
		"org.opencontainers.image.source": Source, "org.opencontainers.image.licenses": "Apache-2.0"} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("%s: label %s=%q, want %q", arch, k, got, want)
		}
	}
	if cf.Config.Labels["org.opencontainers.image.revision"] == "" {
		t.Errorf("%s: no revision label", arch)
	}
	files := extract(t, img)
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no nonroot user:\n%s", arch, files["etc/passwd"])
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"]) || len(files["etc/ssl/certs/ca-certificates.crt"]) < 100_000 {
		t.Errorf("%s: no CA bundle at %s", arch, CABundle)
	}
	bin, ok := files["usr/local/bin/"+svc]
	if !ok {
		t.Fatalf("%s: no /usr/local/bin/%s", arch, svc)
	}
	ef, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: the binary is not ELF: %v", arch, err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if ef.Machine != want {
		t.Errorf("%s: binary for %s, want %s", arch, ef.Machine, want)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: the binary is dynamically linked (it has an interpreter): CGO_ENABLED=0 was not applied", arch)
		}
	}
	if arch != runtime.GOARCH {
		return
	}
	// The binary for this machine: it starts and answers as a user would ask it.
	path := filepath.Join(t.TempDir(), svc)
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	help, err := exec.Command(path, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", svc, err, help)
	}
	if !strings.HasPrefix(string(help), svc+" "+testVersion+" (commit ") || !strings.Contains(string(help), "-nats-url") {
		t.Errorf("%s --help does not start with its name and version, or lists no flags:\n%s", svc, help)
	}
	version, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(version), svc+" "+testVersion) {
		t.Errorf("%s --version: %v: %s", svc, err, version)
	}
}

// extract flattens an image's layers into its files, by path without the leading slash.
func extract(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(h.Name, "/")] = b
		}
	}
}

// TestImagesPushToARegistry pushes as make images REGISTRY=… does, to a registry
// (go-containerregistry's, in memory, over HTTP), an index read back from its archive, and
// reads it back from the registry: both platforms, the same digest.
func TestImagesPushToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	idx := openArchive(t, filepath.Join(built(t), "pod-watcher.tar"))
	o := options{Registry: u.Host + "/fleetwright", Version: testVersion}
	where, err := publish(ctx, o, "pod-watcher", idx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := u.Host + "/fleetwright/pod-watcher:" + testVersion; where != want {
		t.Errorf("pushed to %s, want %s", where, want)
	}
	ref, err := name.ParseReference(where)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := remote.Index(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("reading the pushed index: %v", err)
	}
	im, err := pushed.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Errorf("%d platforms pushed, want 2", len(im.Manifests))
	}
	got, _ := pushed.Digest()
	want, _ := idx.Digest()
	if got != want {
		t.Errorf("pushed %s, built %s", got, want)
	}
}
