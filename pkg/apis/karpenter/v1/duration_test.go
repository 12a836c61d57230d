package v1

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestNillableDurationJSON(t *testing.T) {
	cases := []struct {
		in      string
		never   bool
		want    time.Duration
		written string
		wantErr bool
	}{
		{in: `"720h"`, want: 720 * time.Hour, written: `"720h"`},
		{in: `"1h30m"`, want: 90 * time.Minute, written: `"1h30m"`},
		{in: `"10m"`, want: 10 * time.Minute, written: `"10m"`},
		{in: `"30s"`, want: 30 * time.Second, written: `"30s"`},
		{in: `"0s"`, want: 0, written: `"0s"`},
		{in: `"Never"`, never: true, written: `"Never"`},
		{in: `null`, never: true, written: `"Never"`},
		{in: `"10x"`, wantErr: true},
		{in: `"-5m"`, wantErr: true},
		{in: `30`, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			var d NillableDuration
			err := json.Unmarshal([]byte(tc.in), &d)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.never, d.IsNever())
			if !tc.never {
				require.Equal(t, tc.want, *d.Duration)
			}
			out, err := json.Marshal(d)
			require.NoError(t, err)
			require.Equal(t, tc.written, string(out))
		})
	}
}

// The unstructured converter (used by dynamic clients and informers) must go through the same
// JSON form.
func TestNillableDurationUnstructured(t *testing.T) {
	np := &NodePool{Spec: NodePoolSpec{
		Template:   NodeClaimTemplate{Spec: NodeClaimTemplateSpec{ExpireAfter: MustParseNillableDuration("720h")}},
		Disruption: Disruption{ConsolidateAfter: NillableDuration{}},
	}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(np)
	require.NoError(t, err)
	spec := u["spec"].(map[string]any)
	require.Equal(t, "Never", spec["disruption"].(map[string]any)["consolidateAfter"])
	require.Equal(t, "720h", spec["template"].(map[string]any)["spec"].(map[string]any)["expireAfter"])

	var back NodePool
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u, &back))
	require.Equal(t, 720*time.Hour, *back.Spec.Template.Spec.ExpireAfter.Duration)
	require.True(t, back.Spec.Disruption.ConsolidateAfter.IsNever())
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		720 * time.Hour:            "720h",
		time.Hour + 30*time.Minute: "1h30m",
		time.Hour + 30*time.Second: "1h0m30s",
		1500 * time.Millisecond:    "2s",
		0:                          "0s",
		10 * time.Minute:           "10m",
	} {
		require.Equal(t, want, FormatDuration(d), d)
	}
}
