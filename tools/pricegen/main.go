// Command pricegen writes pkg/catalog's per-region price table from ec2instances.info's data,
// as carried by the Go module github.com/cristim/ec2-instances-info (its data/instances.json,
// public domain). It reads the module from the Go module cache, found with `go list -m -json`,
// so it runs only where that module is downloaded; nothing else in Fleetwright reads the cache:
// the files it writes are committed.
//
//	go run ./tools/pricegen -out pkg/catalog/data
//
// It writes two files:
//
//   - prices.csv.gz: "type,region,ondemand,spotMin,spotMax", one row per instance type and
//     region with a Linux price, sorted; a price the source lacks is empty. The numbers are the
//     source's strings, unchanged.
//   - regions.csv: "region,location", the Pricing API's location name of each region code.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
)

// Module is the source, pinned: regenerating from another version is a deliberate change of
// this line and of PROVENANCE.md.
const Module = "github.com/cristim/ec2-instances-info@v0.0.0-20250528091325-32acf84f42eb"

func main() {
	out := flag.String("out", "pkg/catalog/data", "directory to write prices.csv.gz and regions.csv into")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "pricegen:", err)
		os.Exit(1)
	}
}

// instance is the part of an instances.json entry the table needs.
type instance struct {
	Type    string                                `json:"instance_type"`
	Regions map[string]string                     `json:"regions"`
	Pricing map[string]map[string]json.RawMessage `json:"pricing"`
}

func run(outDir string) error {
	dir, err := moduleDir()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "data", "instances.json"))
	if err != nil {
		return fmt.Errorf("reading instances.json: %w", err)
	}
	var all []instance
	if err := json.Unmarshal(raw, &all); err != nil {
		return fmt.Errorf("decoding instances.json: %w", err)
	}
	rows, locations := table(all)
	if len(rows) == 0 {
		return errors.New("no Linux prices in instances.json")
	}
	var csvBuf bytes.Buffer
	w := csv.NewWriter(&csvBuf)
	_ = w.Write([]string{"type", "region", "ondemand", "spotMin", "spotMax"})
	_ = w.WriteAll(rows)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	// No name or time in the header: the same source gives the same bytes.
	if _, err := zw.Write(csvBuf.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(outDir, "prices.csv.gz"), gz.Bytes(), 0o644); err != nil {
		return err
	}
	var reg bytes.Buffer
	rw := csv.NewWriter(&reg)
	_ = rw.Write([]string{"region", "location"})
	_ = rw.WriteAll(locations)
	if err := os.WriteFile(filepath.Join(outDir, "regions.csv"), reg.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("pricegen: %d rows, %d regions, %d bytes gzipped\n", len(rows), len(locations), gz.Len())
	return nil
}

// table turns the source into sorted rows and the region names of the regions priced.
func table(all []instance) (rows, locations [][]string) {
	names := map[string]string{}
	priced := map[string]bool{}
	for _, it := range all {
		for code, name := range it.Regions {
			names[code] = name
		}
		for region, byOS := range it.Pricing {
			// Other operating systems' entries are not all objects: only Linux's is read.
			var linux map[string]any
			if err := json.Unmarshal(byOS["linux"], &linux); err != nil {
				continue
			}
			od, spotMin, spotMax := str(linux["ondemand"]), str(linux["spot_min"]), str(linux["spot_max"])
			if od == "" && spotMin == "" {
				continue
			}
			rows = append(rows, []string{it.Type, region, od, spotMin, spotMax})
			priced[region] = true
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i][0] != rows[j][0] {
			return rows[i][0] < rows[j][0]
		}
		return rows[i][1] < rows[j][1]
	})
	for region := range priced {
		name := names[region]
		if name == "" {
			name = region
		}
		locations = append(locations, []string{region, name})
	}
	sort.Slice(locations, func(i, j int) bool { return locations[i][0] < locations[j][0] })
	return rows, locations
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// moduleDir finds the source module in the module cache (downloading it if the proxy allows),
// outside any workspace so that no go.mod here needs to require it.
func moduleDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-json", Module)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding %s (go list -m): %w", Module, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("finding %s: go list gave no directory", Module)
	}
	return m.Dir, nil
}
