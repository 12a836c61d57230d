package bus

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// deadLetter parks msg on <prefix>.deadletter.<rest of subject> with the
// original headers and payload plus Fw-Error, Fw-Original-Subject,
// Fw-Deliveries, then terminates it. If the dead-letter publish fails the
// message is not terminated but retried later, so nothing is lost.
func (w *worker[T]) deadLetter(ctx context.Context, msg jetstream.Msg, d Delivery, cause error, outcome string, log zerolog.Logger) {
	if err := w.conn.publishDeadLetter(ctx, d, msg.Data(), cause); err != nil {
		log.Error().Err(err).Msg("dead-lettering failed; retrying the message later")
		_ = msg.NakWithDelay(w.spec.nakDelay(d.Attempt))
		w.count(d, outcomeFailed)
		return
	}
	if err := msg.TermWithReason(truncate("dead-lettered: "+cause.Error(), 256)); err != nil {
		log.Warn().Err(err).Msg("terminating dead-lettered message")
	}
	w.count(d, outcome)
}

func (c *Conn) publishDeadLetter(ctx context.Context, d Delivery, data []byte, cause error) error {
	dl := nats.NewMsg(c.prefix.DeadLetter(d.Subject))
	dl.Data = data
	for k, vs := range d.Header {
		if k == HeaderMsgID || strings.HasPrefix(k, "Nats-Expected") {
			continue
		}
		dl.Header[k] = append([]string(nil), vs...)
	}
	if d.MsgID != "" {
		dl.Header.Set(HeaderOriginalMsgID, d.MsgID)
	}
	dl.Header.Set(HeaderError, truncate(cause.Error(), 4096))
	dl.Header.Set(HeaderOriginalSubject, d.Subject)
	dl.Header.Set(HeaderDeliveries, strconv.FormatUint(d.Attempt, 10))
	if d.Stream != "" {
		// Stable per stored message, so dead-lettering twice stores it once.
		dl.Header.Set(HeaderMsgID, fmt.Sprintf("dl-%s-%d", d.Stream, d.Sequence))
	}
	if _, err := c.js.PublishMsg(ctx, dl); err != nil {
		return fmt.Errorf("publishing dead letter to %s: %w", dl.Subject, err)
	}
	return nil
}

// truncate keeps header values within a sane size; headers may not contain
// newlines either.
func truncate(s string, n int) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	if len(s) > n {
		return s[:n]
	}
	return s
}
