package bus

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of handling one delivered message, the "outcome" label of
// fleetwright_bus_messages_total.
const (
	outcomeAcked        = "acked"
	outcomeRetried      = "retried"
	outcomeDeadLettered = "deadlettered"
	outcomeUndecodable  = "undecodable"
	outcomeFollowed     = "followed" // handed to a Follow handler (nothing to ack)
	outcomeFailed       = "failed"   // could not ack/nak/dead-letter; the server will redeliver
)

// metrics holds the bus's Prometheus collectors.
type metrics struct {
	messages  *prometheus.CounterVec   // subject, outcome
	published *prometheus.CounterVec   // subject, result
	handle    *prometheus.HistogramVec // subject
	lag       *prometheus.GaugeVec     // consumer: messages not yet delivered
	ackWait   *prometheus.GaugeVec     // consumer: delivered, not yet acknowledged
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetwright_bus_messages_total",
			Help: "Messages delivered to consumers, by subject and outcome (acked, retried, deadlettered, undecodable, failed; followed for Follow).",
		}, []string{"subject", "outcome"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetwright_bus_published_total",
			Help: "Messages published to JetStream, by subject and result (ok, duplicate, error).",
		}, []string{"subject", "result"}),
		handle: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fleetwright_bus_handle_seconds",
			Help:    "Time a consumer handler took for one message.",
			Buckets: prometheus.DefBuckets,
		}, []string{"subject"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetwright_bus_consumer_lag_messages",
			Help: "JetStream consumer lag: messages in the stream not yet delivered to the durable consumer.",
		}, []string{"consumer"}),
		ackWait: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetwright_bus_consumer_ack_pending_messages",
			Help: "Messages delivered to the durable consumer and not yet acknowledged.",
		}, []string{"consumer"}),
	}
	var err error
	if m.lag, err = register(reg, m.lag); err != nil {
		return nil, err
	}
	if m.ackWait, err = register(reg, m.ackWait); err != nil {
		return nil, err
	}
	m.messages, err = register(reg, m.messages)
	if err != nil {
		return nil, err
	}
	m.published, err = register(reg, m.published)
	if err != nil {
		return nil, err
	}
	m.handle, err = register(reg, m.handle)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// the same name, so that several connections in one process share metrics.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
