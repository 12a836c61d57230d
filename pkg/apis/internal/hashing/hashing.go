// Package hashing hashes API objects for drift detection: the same content always gives the same
// hash, whatever the order of map keys or of list items, and a field left out hashes as a field
// set to its zero value (nil, false, 0, "", empty list or map), as Karpenter's hashes do
// (hashstructure with SlicesAsSets, IgnoreZeroValue and ZeroNil).
package hashing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
)

// Of is the hash of v's JSON form, canonicalized: zero values dropped from objects, lists
// treated as sets (sorted by their items' canonical form), object keys sorted. It is the decimal
// FNV-1a 64-bit sum, as Karpenter writes its hashes. v must encode as JSON.
func Of(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing: encoding: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return "", fmt.Errorf("hashing: decoding: %w", err)
	}
	canon, err := json.Marshal(canonical(tree))
	if err != nil {
		return "", fmt.Errorf("hashing: encoding canonical form: %w", err)
	}
	h := fnv.New64a()
	_, _ = h.Write(canon)
	return strconv.FormatUint(h.Sum64(), 10), nil
}

// canonical drops zero values from objects and sorts lists; json.Marshal sorts object keys.
func canonical(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, item := range t {
			c := canonical(item)
			if !zero(c) {
				out[k] = c
			}
		}
		return out
	case []any:
		type keyed struct {
			key  string
			item any
		}
		items := make([]keyed, 0, len(t))
		for _, item := range t {
			c := canonical(item)
			b, _ := json.Marshal(c) // a tree decoded from JSON always encodes
			items = append(items, keyed{string(b), c})
		}
		sort.SliceStable(items, func(i, j int) bool { return items[i].key < items[j].key })
		out := make([]any, 0, len(items))
		for _, k := range items {
			out = append(out, k.item)
		}
		return out
	}
	return v
}

func zero(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case bool:
		return !t
	case string:
		return t == ""
	case json.Number:
		f, err := t.Float64()
		return err == nil && f == 0
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}
