package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// NonRoot is the user and group every image runs as, distroless's "nonroot": the Deployments'
// runAsUser and runAsGroup.
const NonRoot = 65532

// CABundle is where the CA certificates go: the first path Go's crypto/x509 reads on Linux.
const CABundle = "/etc/ssl/certs/ca-certificates.crt"

// caBundle is Mozilla's root store as PEM, from the pinned Go module. A root NSS trusts only
// for certificates issued before a date (a "distrust after" constraint) is left out: a PEM
// bundle cannot carry the constraint, and without it the root would be trusted for everything.
func caBundle() ([]byte, int) {
	var b bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
		n++
	}
	return b.Bytes(), n
}

// entry is one file or directory of a layer.
type entry struct {
	name     string
	mode     int64 // permission bits; a directory when dir
	dir      bool
	uid, gid int
	body     []byte
	file     string // read the body from this file instead
}

// baseLayer holds what a static Go binary needs around it, the same in every image (so a
// registry stores it once): the nonroot user, the CA bundle, a resolver configuration,
// /tmp and the user's home.
func baseLayer(work string, created time.Time) (v1.Layer, error) {
	certs, n := caBundle()
	if n < 100 {
		return nil, fmt.Errorf("the CA bundle holds %d roots: the x509roots module is not what it should be", n)
	}
	return layerOf(work, created, []entry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot))},
		{name: "etc/group", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot))},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/ssl/", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/", dir: true, mode: 0o755},
		{name: CABundle[1:], mode: 0o644, body: certs},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: NonRoot, gid: NonRoot},
		{name: "tmp/", dir: true, mode: 0o1777},
	})
}

// binaryLayer holds one service binary at /usr/local/bin/<name>.
func binaryLayer(work string, created time.Time, name, path string) (v1.Layer, error) {
	return layerOf(work, created, []entry{
		{name: "usr/", dir: true, mode: 0o755},
		{name: "usr/local/", dir: true, mode: 0o755},
		{name: "usr/local/bin/", dir: true, mode: 0o755},
		{name: "usr/local/bin/" + name, mode: 0o755, file: path},
	})
}

// layerOf writes the entries as a tar (every time the same: fixed times and owners, no
// user or group names) into a file in work and makes it a gzip-compressed OCI layer.
func layerOf(work string, created time.Time, entries []entry) (v1.Layer, error) {
	f, err := os.CreateTemp(work, "layer-*.tar")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created, Format: tar.FormatPAX}
		var body io.Reader
		switch {
		case e.dir:
			h.Typeflag = tar.TypeDir
		case e.file != "":
			src, err := os.Open(e.file)
			if err != nil {
				return nil, err
			}
			defer src.Close()
			st, err := src.Stat()
			if err != nil {
				return nil, err
			}
			h.Typeflag, h.Size, body = tar.TypeReg, st.Size(), src
		default:
			h.Typeflag, h.Size, body = tar.TypeReg, int64(len(e.body)), bytes.NewReader(e.body)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s: %w", e.name, err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return nil, fmt.Errorf("writing %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(f.Name(), tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}
