package karpmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Karpenter's names of the controllers whose job a Fleetwright loop does, the controller label
// of controller_runtime_reconcile_* (Karpenter's performance dashboard picks one).
const (
	ControllerProvisioner         = "provisioner"                 // scheduler: a pending-pod batch
	ControllerDisruption          = "disruption"                  // scheduler: a disruption pass
	ControllerPodTrigger          = "provisioner.trigger.pod"     // pod-watcher: a pod seen pending
	ControllerNodeClaimLifecycle  = "nodeclaim.lifecycle"         // launcher: a launch intent
	ControllerNodeClaimStatus     = "nodepool.counter"            // launcher: a status pass
	ControllerNodeClaimDisruption = "nodeclaim.disruption"        // launcher: drift recorded on claims
	ControllerNodeTermination     = "node.termination"            // terminator: a node drained
	ControllerInterruption        = "interruption"                // terminator: an interruption message
	ControllerNodeClaimGC         = "nodeclaim.garbagecollection" // terminator: an orphan pass
)

// Reconciles is controller-runtime's controller_runtime_reconcile_total{controller, result}
// and controller_runtime_reconcile_time_seconds{controller}.
type Reconciles struct {
	total *prometheus.CounterVec
	time  *prometheus.HistogramVec
}

// Reconciles registers both families.
func (f Families) Reconciles() *Reconciles {
	return &Reconciles{
		total: f.counter("controller_runtime_reconcile_total", "Total number of reconciliations per controller", LabelController, LabelResult),
		time: f.histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
			reconcileBuckets(), LabelController),
	}
}

// Observe counts one reconciliation of controller that started at start and ended with err
// (result success or error, controller-runtime's values).
func (r *Reconciles) Observe(controller string, start time.Time, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	r.total.WithLabelValues(controller, result).Inc()
	r.time.WithLabelValues(controller).Observe(time.Since(start).Seconds())
}
