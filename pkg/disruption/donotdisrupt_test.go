package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// The annotation's values as Karpenter v1 reads them: "true" for good, a duration for that long
// after the pod started, anything else not at all (and said so).
func TestDoNotDisrupt(t *testing.T) {
	started := monday9
	cases := []struct {
		name      string
		value     *string // nil: no annotation
		start     *time.Time
		now       time.Time
		protected bool
		until     time.Time
		invalid   bool
	}{
		{name: "no annotation", now: started},
		{name: "empty value", value: new(""), now: started},
		{name: "false", value: new("false"), now: started},
		{name: "true", value: new("true"), start: &started, now: started.Add(24 * time.Hour), protected: true},
		{name: "true, not started", value: new("true"), now: started, protected: true},
		{name: "5m, 4m after the start", value: new("5m"), start: &started, now: started.Add(4 * time.Minute), protected: true,
			until: started.Add(5 * time.Minute)},
		{name: "5m, at the end: over", value: new("5m"), start: &started, now: started.Add(5 * time.Minute), until: started.Add(5 * time.Minute)},
		{name: "5m, 6m after the start", value: new("5m"), start: &started, now: started.Add(6 * time.Minute), until: started.Add(5 * time.Minute)},
		{name: "1h30m", value: new("1h30m"), start: &started, now: started.Add(time.Hour), protected: true, until: started.Add(90 * time.Minute)},
		{name: "a duration, not started yet: protected, end unknown", value: new("5m"), now: started, protected: true},
		{name: "zero duration", value: new("0s"), start: &started, now: started, invalid: true},
		{name: "negative duration", value: new("-5m"), start: &started, now: started, invalid: true},
		{name: "a number without unit", value: new("300"), start: &started, now: started, invalid: true},
		{name: "True is not true", value: new("True"), start: &started, now: started, invalid: true},
		{name: "yes", value: new("yes"), start: &started, now: started, invalid: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &corev1.Pod{}
			if c.value != nil {
				p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: *c.value}
			}
			if c.start != nil {
				p.Status.StartTime = &metav1.Time{Time: *c.start}
			}
			protected, until, err := DoNotDisrupt(p, c.now)
			assert.Equal(t, c.protected, protected)
			assert.Equal(t, c.until, until)
			if c.invalid {
				assert.ErrorContains(t, err, "neither \"true\" nor a positive duration")
			} else {
				assert.NoError(t, err)
			}
		})
	}
}
