package main

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RefName is the index.json annotation an OCI layout names an image by
// (`skopeo copy oci-archive:launcher.tar:<version> …`).
const RefName = "org.opencontainers.image.ref.name"

// publish pushes the index to the registry, or writes it as an OCI archive, and says where it
// went.
func publish(ctx context.Context, o options, svc string, idx v1.ImageIndex, work string) (string, error) {
	if o.Registry != "" {
		ref, err := name.NewTag(o.Registry + "/" + svc + ":" + o.Version)
		if err != nil {
			return "", fmt.Errorf("image reference: %w", err)
		}
		if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return "", fmt.Errorf("pushing %s: %w", ref, err)
		}
		return ref.String(), nil
	}
	dir := filepath.Join(work, "layout-"+svc)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefName: o.Version})); err != nil {
		return "", fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := os.MkdirAll(o.OCIDir, 0o755); err != nil {
		return "", err
	}
	archive := filepath.Join(o.OCIDir, svc+".tar")
	if err := tarDir(dir, archive); err != nil {
		return "", fmt.Errorf("writing %s: %w", archive, err)
	}
	return archive, os.RemoveAll(dir)
}

// tarDir writes the directory's files into a tar at path (through a temporary file, so a
// reader never sees half an archive), in name order, with fixed times.
func tarDir(dir, path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	var names []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(names)
	for _, p := range names {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Format: tar.FormatPAX}
		if st.IsDir() {
			h.Name, h.Typeflag, h.Mode = h.Name+"/", tar.TypeDir, 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
