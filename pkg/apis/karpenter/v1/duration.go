package v1

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Never is how a NillableDuration that never elapses is written.
const Never = "Never"

// NillableDuration is a duration that may be "Never", as Karpenter's expireAfter and
// consolidateAfter are. It is written as a Go duration ("720h", "1h30m", "30s") or "Never";
// Never is a nil Duration. The zero value is Never.
type NillableDuration struct {
	Duration *time.Duration `json:"-"`
}

// MustParseNillableDuration parses s as a NillableDuration and panics if it is not one. For
// constants and tests.
func MustParseNillableDuration(s string) NillableDuration {
	d, err := ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// ParseNillableDuration parses "Never" or a non-negative Go duration.
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NillableDuration{}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("parsing duration %q: %w", s, err)
	}
	if d < 0 {
		return NillableDuration{}, fmt.Errorf("parsing duration %q: negative", s)
	}
	return NillableDuration{Duration: &d}, nil
}

// DurationOf is a NillableDuration of d.
func DurationOf(d time.Duration) NillableDuration { return NillableDuration{Duration: &d} }

// IsNever reports whether the duration never elapses.
func (d NillableDuration) IsNever() bool { return d.Duration == nil }

// String writes the duration the way the API does: "Never", or the shortest form that the
// CRD's pattern accepts ("720h", "1h30m", "0s").
func (d NillableDuration) String() string {
	if d.Duration == nil {
		return Never
	}
	return FormatDuration(*d.Duration)
}

// FormatDuration writes d without the zero units time.Duration.String leaves in ("720h0m0s"
// becomes "720h"). Sub-second parts are rounded away, as the API's pattern has no unit for them.
func FormatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d == 0 {
		return "0s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalJSON writes the duration as a string.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON reads "Never" or a duration string; null reads as Never.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("reading duration: %w", err)
	}
	parsed, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	*d = parsed
	return nil
}
