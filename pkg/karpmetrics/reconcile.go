package karpmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Karpenter's names of the controllers whose job a Fleetwright loop does, the controller label
// of controller_runtime_reconcile_* (Karpenter's performance dashboard picks one).
const (
	ControllerProvisioner         = "provisioner"                // scheduler: a pending-pod batch
	ControllerDisruption          = "disruption"                 // scheduler: a disruption pass
	ControllerPodTrigger          = "provisioner.trigger.pod"    // pod-watcher: a pod seen pending
	ControllerNodeClaimLifecycle  = "nodeclaim.lifecycle"        // launcher: a launch intent
	ControllerNodeClaimStatus     = "nodepool.counter"           // launcher: a status pass
	ControllerNodeClaimDisruption = "nodeclaim.disruption"       // launcher: drift recorded on claims
	ControllerNodeTermination     = "node.termination"           // terminator: a node drained
	ControllerInterruption        = "interruption"               // terminator: a receive from the interruption queue
	ControllerInstanceGC          = "instance.garbagecollection" // terminator: an orphan pass (the AWS provider's)
)

// Reconciles is controller-runtime's controller_runtime_reconcile_total{controller, result},
// controller_runtime_reconcile_errors_total{controller} and
// controller_runtime_reconcile_time_seconds{controller}.
type Reconciles struct {
	total  *prometheus.CounterVec
	errors *prometheus.CounterVec
	time   *prometheus.HistogramVec
}

// Reconciles registers both families.
func (f Families) Reconciles() *Reconciles {
	return &Reconciles{
		total: f.counter("controller_runtime_reconcile_total", "Total number of reconciliations per controller", LabelController, LabelResult),
		errors: f.counter("controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller",
			LabelController),
		time: f.histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
			reconcileBuckets(), LabelController),
	}
}

// controller-runtime's result values; Fleetwright's loops requeue on a timer, not by result,
// so only success and error ever count, but all four are served, as controller-runtime does.
var results = []string{"error", "requeue_after", "requeue", "success"}

// Init serves the controller's series at 0, as controller-runtime does when a controller
// starts, so a rate() over them has a start.
func (r *Reconciles) Init(controllers ...string) {
	for _, c := range controllers {
		for _, res := range results {
			r.total.WithLabelValues(c, res)
		}
		r.errors.WithLabelValues(c)
	}
}

// ObserveRequeue counts one reconciliation of controller that started at start and has more
// to do later (a drain still going): requeue_after, as controller-runtime counts a result with
// RequeueAfter, neither a success nor an error.
func (r *Reconciles) ObserveRequeue(controller string, start time.Time) {
	r.total.WithLabelValues(controller, "requeue_after").Inc()
	r.time.WithLabelValues(controller).Observe(time.Since(start).Seconds())
}

// Observe counts one reconciliation of controller that started at start and ended with err
// (result success or error, controller-runtime's values).
func (r *Reconciles) Observe(controller string, start time.Time, err error) {
	result := "success"
	if err != nil {
		result = "error"
		r.errors.WithLabelValues(controller).Inc()
	}
	r.total.WithLabelValues(controller, result).Inc()
	r.time.WithLabelValues(controller).Observe(time.Since(start).Seconds())
}
