package bus

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// heartbeat keeps the fetched, unsettled messages of one batch in progress, so the server
// redelivers them only when this process stops beating. A short AckWait then brings a dead
// consumer's work back in seconds without ever taking it from a live one that is slow.
type heartbeat struct {
	every time.Duration
	log   zerolog.Logger

	mu      sync.Mutex
	pending map[jetstream.Msg]struct{}
	done    chan struct{}
	wg      sync.WaitGroup
}

func newHeartbeat(every time.Duration, log zerolog.Logger) *heartbeat {
	h := &heartbeat{every: max(every, 100*time.Millisecond), log: log, pending: map[jetstream.Msg]struct{}{}, done: make(chan struct{})}
	h.wg.Add(1)
	go h.run()
	return h
}

// track passes the batch's messages on, each one kept in progress from the moment it arrives
// until settled is called for it.
func (h *heartbeat) track(in <-chan jetstream.Msg) <-chan jetstream.Msg {
	out := make(chan jetstream.Msg, cap(in))
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(out)
		for m := range in {
			h.mu.Lock()
			h.pending[m] = struct{}{}
			h.mu.Unlock()
			out <- m
		}
	}()
	return out
}

// settled stops beating for a message that was acked, nakked or dead-lettered.
func (h *heartbeat) settled(m jetstream.Msg) {
	h.mu.Lock()
	delete(h.pending, m)
	h.mu.Unlock()
}

// stop ends the heartbeat once the batch is done.
func (h *heartbeat) stop() {
	close(h.done)
	h.wg.Wait()
}

func (h *heartbeat) run() {
	defer h.wg.Done()
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		h.mu.Lock()
		msgs := make([]jetstream.Msg, 0, len(h.pending))
		for m := range h.pending {
			msgs = append(msgs, m)
		}
		h.mu.Unlock()
		for _, m := range msgs {
			if err := m.InProgress(); err != nil {
				// The connection is gone or going: the server redelivers after AckWait, as
				// it should for a consumer that cannot reach it.
				h.log.Debug().Err(err).Msg("heartbeat for a message in progress failed")
			}
		}
	}
}
