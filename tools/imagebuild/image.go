package main

import (
	"fmt"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Source is the repository the OCI source label names.
const Source = "https://github.com/fleetwright/fleetwright"

// labels are the OCI annotations (image-spec's pre-defined keys) on every image and index.
func labels(o options, svc string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       svc,
		"org.opencontainers.image.description": "Fleetwright " + svc + ": a Karpenter-compatible node autoscaler for Kubernetes on AWS",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.url":         Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.vendor":      "Fleetwright",
		"org.opencontainers.image.created":     o.Created.Format("2006-01-02T15:04:05Z"),
	}
}

// serviceIndex is one service's image for every platform, joined in an OCI image index.
func serviceIndex(o options, svc string, base v1.Layer, bins binaries, work string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.Annotations(idx, labels(o, svc)).(v1.ImageIndex)
	for _, p := range o.Platforms {
		bin, err := binaryLayer(work, o.Created, svc, bins[p][svc])
		if err != nil {
			return nil, err
		}
		img, err := image(o, svc, p, base, bin)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}},
		})
	}
	return idx, nil
}

// image is one platform's image: the base layer, the binary, and a config that runs the
// binary as the nonroot user.
func image(o options, svc string, p platform, base, bin v1.Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, base, bin)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Created = v1.Time{Time: o.Created}
	user := strconv.Itoa(NonRoot)
	cf.Config = v1.Config{
		Entrypoint: []string{"/usr/local/bin/" + svc},
		User:       user + ":" + user,
		WorkingDir: "/home/nonroot",
		Env:        []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CABundle},
		Labels:     labels(o, svc),
	}
	for i := range cf.History {
		cf.History[i].Created = v1.Time{Time: o.Created}
		cf.History[i].CreatedBy = "imagebuild (tools/imagebuild)"
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels(o, svc)).(v1.Image), nil
}

// indexSize is what the index's images take compressed: each platform's manifest, config and
// layers (the base layer counted once per platform).
func indexSize(idx v1.ImageIndex) int64 {
	var total int64
	im, err := idx.IndexManifest()
	if err != nil {
		return 0
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			continue
		}
		m, err := img.Manifest()
		if err != nil {
			continue
		}
		total += d.Size + m.Config.Size
		for _, l := range m.Layers {
			total += l.Size
		}
	}
	return total
}
