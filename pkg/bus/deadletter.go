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
	c.fitPayload(dl)
	if _, err := c.js.PublishMsg(ctx, dl); err != nil {
		return fmt.Errorf("publishing dead letter to %s: %w", dl.Subject, err)
	}
	return nil
}

// DeadLetter parks a message that never was a bus message — an SQS body that could not be
// read, say — on <prefix>.deadletter.<origin without prefix>, with Fw-Error and
// Fw-Original-Subject (origin) set; id, when not empty, makes a repeat store it once.
func (c *Conn) DeadLetter(ctx context.Context, origin string, data []byte, cause error, id string) error {
	dl := nats.NewMsg(c.prefix.DeadLetter(origin))
	dl.Data = data
	dl.Header.Set(HeaderError, truncate(cause.Error(), 4096))
	dl.Header.Set(HeaderOriginalSubject, origin)
	if id != "" {
		dl.Header.Set(HeaderMsgID, id)
	}
	c.fitPayload(dl)
	if _, err := c.js.PublishMsg(ctx, dl); err != nil {
		return fmt.Errorf("publishing dead letter to %s: %w", dl.Subject, err)
	}
	return nil
}

// fitPayload cuts a dead letter's payload so that it and its headers fit the server's max
// payload, recording the original size in Fw-Truncated. A message the server took may not fit
// once the dead letter's headers are added; refused, it would be nakked and come back for
// ever, never parked.
func (c *Conn) fitPayload(m *nats.Msg) {
	limit := int(c.nc.MaxPayload())
	if limit <= 0 || headerSize(m.Header)+len(m.Data) <= limit {
		return
	}
	m.Header.Set(HeaderTruncated, strconv.Itoa(len(m.Data)))
	keep := limit - headerSize(m.Header) - 64 // room for the client's own framing
	m.Data = m.Data[:max(0, min(keep, len(m.Data)))]
}

// headerSize is the encoded size of NATS headers ("NATS/1.0\r\n", "K: V\r\n" each, "\r\n").
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
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
