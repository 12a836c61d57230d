package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// DoNotDisrupt reads a pod's karpenter.sh/do-not-disrupt annotation at now, as Karpenter v1
// does (pkg/utils/pod IsDoNotDisruptActive):
//
//   - "true" protects the pod for as long as it carries the annotation (until is zero);
//   - a positive duration ("5m", "1h30m") protects it for that long after it started
//     (status.startTime): until is startTime + duration, and the pod is protected while now is
//     before it. A pod not started yet is protected, with until zero (its start is unknown);
//   - anything else protects nothing; err says what is wrong with a value that is neither
//     (an absent annotation, "" and "false" are no error).
//
// Only the annotation is read: a pod that is terminating or finished is no longer protected
// by anything, which is the caller's to check.
func DoNotDisrupt(pod *corev1.Pod, now time.Time) (protected bool, until time.Time, err error) {
	v, ok := pod.Annotations[karpv1.DoNotDisruptAnnotationKey]
	switch {
	case !ok || v == "" || v == "false":
		return false, time.Time{}, nil
	case v == "true":
		return true, time.Time{}, nil
	}
	d, perr := time.ParseDuration(v)
	if perr != nil || d <= 0 {
		return false, time.Time{}, fmt.Errorf("%s %q is neither \"true\" nor a positive duration: it protects nothing", karpv1.DoNotDisruptAnnotationKey, v)
	}
	if pod.Status.StartTime == nil {
		return true, time.Time{}, nil
	}
	until = pod.Status.StartTime.Add(d)
	return now.Before(until), until, nil
}
