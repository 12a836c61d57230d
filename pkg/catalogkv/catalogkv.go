// Package catalogkv keeps the instance catalog in the JetStream key-value bucket the launcher
// writes and the scheduler reads (the launcher creates it, bus.Conn.EnsureOwnStreams):
//
//	launcher ──Publish──> bucket <prefix>-catalog:  meta            catalogv1.Catalog without types
//	                                                types.<name>    catalogv1.InstanceType, one key each
//	scheduler <──Watch── (live view: initial values, then every update and delete)
//
// One key per type keeps every value far below NATS's payload limit and lets a refresh write
// only what changed (a price, an offering).
package catalogkv

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/clock"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
)

const (
	metaKey    = "meta"
	typePrefix = "types."
)

// Publish writes the catalog: every type whose value changed, deletes of types no longer
// offered, then meta — last, so that a watcher that has seen meta has seen every type before
// it. It returns how many type keys it wrote or deleted.
func Publish(ctx context.Context, kv jetstream.KeyValue, cat *catalogv1.Catalog) (int, error) {
	existing := map[string]bool{}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing catalog keys: %w", err)
	}
	for k := range keys.Keys() {
		if strings.HasPrefix(k, typePrefix) {
			existing[k] = true
		}
	}
	changed := 0
	for _, it := range cat.GetInstanceTypes() {
		key := typePrefix + it.GetName()
		delete(existing, key)
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(it)
		if err != nil {
			return changed, fmt.Errorf("encoding %s: %w", it.GetName(), err)
		}
		if cur, err := kv.Get(ctx, key); err == nil && string(cur.Value()) == string(b) {
			continue
		}
		if _, err := kv.Put(ctx, key, b); err != nil {
			return changed, fmt.Errorf("writing %s: %w", key, err)
		}
		changed++
	}
	for key := range existing {
		if err := kv.Delete(ctx, key); err != nil {
			return changed, fmt.Errorf("deleting %s: %w", key, err)
		}
		changed++
	}
	meta := proto.Clone(cat).(*catalogv1.Catalog)
	meta.InstanceTypes = nil
	b, err := proto.Marshal(meta)
	if err != nil {
		return changed, fmt.Errorf("encoding catalog meta: %w", err)
	}
	if _, err := kv.Put(ctx, metaKey, b); err != nil {
		return changed, fmt.Errorf("writing catalog meta: %w", err)
	}
	return changed, nil
}

// Watcher is a live view of the catalog.
type Watcher struct {
	mu      sync.RWMutex
	meta    *catalogv1.Catalog
	types   map[string]*catalogv1.InstanceType
	ready   bool
	version uint64
	// snapshot is the catalog built at snapshotVersion: rebuilt only when an update arrived.
	snapshot        *catalogv1.Catalog
	snapshotVersion uint64
	errs            int
	readyCh         chan struct{}
}

// Watch starts following the bucket until ctx ends. Undecodable values are skipped and
// counted (Errors), never fatal.
func Watch(ctx context.Context, kv jetstream.KeyValue) (*Watcher, error) {
	kw, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watching catalog bucket: %w", err)
	}
	w := &Watcher{types: map[string]*catalogv1.InstanceType{}, readyCh: make(chan struct{})}
	go func() {
		defer func() { _ = kw.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-kw.Updates():
				if !ok {
					return
				}
				w.apply(e)
			}
		}
	}()
	return w, nil
}

func (w *Watcher) apply(e jetstream.KeyValueEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e == nil { // the initial values have all been delivered
		if !w.ready {
			w.ready = true
			close(w.readyCh)
		}
		return
	}
	w.version++
	key := e.Key()
	deleted := e.Operation() != jetstream.KeyValuePut
	switch {
	case key == metaKey && !deleted:
		var m catalogv1.Catalog
		if err := proto.Unmarshal(e.Value(), &m); err != nil {
			w.errs++
			return
		}
		w.meta = &m
	case strings.HasPrefix(key, typePrefix):
		name := strings.TrimPrefix(key, typePrefix)
		if deleted {
			delete(w.types, name)
			return
		}
		var it catalogv1.InstanceType
		if err := proto.Unmarshal(e.Value(), &it); err != nil {
			w.errs++
			return
		}
		w.types[name] = &it
	}
}

// ErrEmpty says no complete catalog has been published yet.
var ErrEmpty = errors.New("no instance catalog published yet (the launcher publishes it)")

// Catalog returns the current catalog, types sorted by name, and a version that changes with
// every update (for caching what is derived from it). Until the bucket's initial values are
// read and a meta entry is seen — Publish writes it after every type — it returns ErrEmpty, so
// nobody packs against half a catalog.
// The returned catalog is shared until the next update: callers must not modify it.
func (w *Watcher) Catalog() (*catalogv1.Catalog, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ready || w.meta == nil || len(w.types) == 0 {
		return nil, w.version, ErrEmpty
	}
	if w.snapshot != nil && w.snapshotVersion == w.version {
		return w.snapshot, w.version, nil
	}
	out := &catalogv1.Catalog{}
	if w.meta != nil {
		out.GenerateTime, out.Region, out.Source = w.meta.GenerateTime, w.meta.Region, w.meta.Source
	}
	for _, it := range w.types {
		out.InstanceTypes = append(out.InstanceTypes, it)
	}
	sort.Slice(out.InstanceTypes, func(i, j int) bool { return out.InstanceTypes[i].Name < out.InstanceTypes[j].Name })
	w.snapshot, w.snapshotVersion = out, w.version
	return out, w.version, nil
}

// Lookup returns one instance type of the current catalog; false until the bucket's initial
// values are read, and for a type the catalog does not offer.
func (w *Watcher) Lookup(name string) (*catalogv1.InstanceType, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	it, ok := w.types[name]
	return it, ok && w.ready
}

// Wait returns once a complete catalog is there (at once when the bucket already holds one),
// logging once if it has to wait: the launcher publishes the first catalog a second or so after
// its first start.
func (w *Watcher) Wait(ctx context.Context, log zerolog.Logger) error {
	logged := false
	for {
		_, _, err := w.Catalog()
		if err == nil {
			return nil
		}
		if !logged {
			log.Warn().Err(err).Msg("waiting for the instance catalog")
			logged = true
		}
		if !clock.Sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// Ready is closed once the bucket's initial values have been read.
func (w *Watcher) Ready() <-chan struct{} { return w.readyCh }

// Errors counts values that could not be decoded.
func (w *Watcher) Errors() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.errs
}

// Facts reads a published instance type back as pkg/catalog's type, the form the scheduling
// core derives labels and capacity from (scheduling.FromCatalog, scheduling.TypeLabels).
func Facts(it *catalogv1.InstanceType) catalog.InstanceType {
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	i64 := func(n int64) *int64 {
		if n == 0 {
			return nil
		}
		return &n
	}
	t := catalog.InstanceType{
		Name: it.GetName(), Family: it.GetFamily(), Generation: int(it.GetGeneration()), Category: it.GetCategory(),
		Size: it.GetSize(), VCPU: int(it.GetVcpu()), MemoryMiB: it.GetMemoryMib(), Arch: it.GetArchitecture(),
		CPUManufacturer: str(it.GetCpuManufacturer()), GPUCount: int(it.GetGpuCount()),
		GPUManufacturer: str(it.GetGpuManufacturer()), GPUName: str(it.GetGpuName()), GPUMemoryMiB: i64(it.GetGpuMemoryMib()),
		AcceleratorManufacturer: str(it.GetAcceleratorManufacturer()), AcceleratorName: str(it.GetAcceleratorName()),
		MaxPods: int(it.GetMaxPods()), Burstable: it.GetBurstable(), BareMetal: it.GetBareMetal(),
		Hypervisor: str(it.GetHypervisor()), LocalNVMeGiB: i64(it.GetLocalNvmeGib()),
		NetworkBandwidthMbps: i64(it.GetNetworkBandwidthMbps()), EBSBandwidthMbps: i64(it.GetEbsBandwidthMbps()),
	}
	if n := int(it.GetAcceleratorCount()); n > 0 {
		t.AcceleratorCount = &n
	}
	if n := int(it.GetCpuSustainedClockSpeedMhz()); n > 0 {
		t.CPUSustainedClockSpeedMhz = &n
	}
	eit := it.GetEncryptionInTransitSupported()
	t.EncryptionInTransitSupported = &eit
	if t.MaxPods == 0 {
		t.MaxPods = 110
	}
	return t
}
