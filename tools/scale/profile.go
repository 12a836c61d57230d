package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// profiler takes each service's CPU profile over the first seconds of a run and its heap
// profile at the end, from pprof on the admin port (services started with ENABLE_PROFILING=true),
// into dir as <service>.cpu.pprof and <service>.heap.pprof.
type profiler struct {
	dir   string
	admin map[string]string

	wg   sync.WaitGroup
	mu   sync.Mutex
	errs map[string]error
}

func startProfiles(ctx context.Context, dir string, seconds int, admin map[string]string) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the profile directory: %w", err)
	}
	p := &profiler{dir: dir, admin: admin, errs: map[string]error{}}
	for svc, base := range admin {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds)
			p.record(svc, fetchProfile(ctx, url, filepath.Join(dir, svc+".cpu.pprof"), time.Duration(seconds+30)*time.Second))
		}()
	}
	return p, nil
}

// finish takes the heap profiles, waits for the CPU profiles and says where they are.
func (p *profiler) finish(ctx context.Context, out io.Writer) {
	for svc, base := range p.admin {
		p.record(svc, fetchProfile(ctx, base+"/debug/pprof/heap", filepath.Join(p.dir, svc+".heap.pprof"), 30*time.Second))
	}
	p.wg.Wait()
	svcs := make([]string, 0, len(p.admin))
	for svc := range p.admin {
		svcs = append(svcs, svc)
	}
	sort.Strings(svcs)
	for _, svc := range svcs {
		if err := p.errs[svc]; err != nil {
			fmt.Fprintf(out, "profile of %s: %v\n", svc, err)
		}
	}
	fmt.Fprintf(out, "profiles: %s (go tool pprof -top %s)\n", p.dir, filepath.Join(p.dir, "scheduler.cpu.pprof"))
}

func (p *profiler) record(svc string, err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errs[svc] == nil {
		p.errs[svc] = err
	}
}

func fetchProfile(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s: 404, profiling is off (start the stack with ENABLE_PROFILING=true; --stack own does)", url)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
