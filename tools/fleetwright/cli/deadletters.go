package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fleetwright/fleetwright/pkg/bus"
)

// DeadLetter is one stored dead letter.
type DeadLetter struct {
	Stream     string    `json:"stream"`
	Seq        uint64    `json:"seq"`
	Time       time.Time `json:"time"`
	Subject    string    `json:"originalSubject"`
	MsgID      string    `json:"originalMsgID,omitempty"`
	Type       string    `json:"type,omitempty"`
	Deliveries string    `json:"deliveries,omitempty"`
	Error      string    `json:"error"`
}

func deadLetterOf(s stored) DeadLetter {
	h := s.Msg.Header
	return DeadLetter{Stream: s.Stream, Seq: s.Seq, Time: s.Time.UTC(), Subject: h.Get(bus.HeaderOriginalSubject),
		MsgID: h.Get(bus.HeaderOriginalMsgID), Type: h.Get(bus.HeaderType), Deliveries: h.Get(bus.HeaderDeliveries), Error: h.Get(bus.HeaderError)}
}

// deadLettersLsCmd lists the stored dead letters (the DEADLETTER stream keeps them a week; the
// audit stream as long as it keeps anything).
func deadLettersLsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("deadletters ls", &o, stderr)
	stream := fs.String("stream", "", "stream to read (default: the audit stream if there is one, else the DEADLETTER stream)")
	since := fs.Duration("since", 0, "only those stored in the last `DURATION`")
	pos, err := parse(fs, &o, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("deadletters ls takes no arguments, got %q", pos)
	}
	conn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	var from time.Time
	if *since > 0 {
		from = time.Now().Add(-*since)
	}
	msgs, err := newHistory(conn, *stream).read(ctx, []string{conn.Prefix().AllDeadLetters()}, from)
	if err != nil {
		return err
	}
	out := []DeadLetter{}
	for _, m := range msgs {
		out = append(out, deadLetterOf(m))
	}
	if o.output == "json" {
		return printJSON(stdout, out)
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no dead letters stored")
		return nil
	}
	for _, d := range out {
		fmt.Fprintf(stdout, "%s  %s #%d  %s (%s, %s deliveries): %s\n", d.Time.Format(time.RFC3339), d.Stream, d.Seq, d.Subject, or(d.Type, "no type"), or(d.Deliveries, "?"), d.Error)
	}
	fmt.Fprintf(stdout, "replay with: fleetwright deadletters replay [--stream %s] SEQ...\n", out[0].Stream)
	return nil
}

// defaultReplayMaxAge is how old a dead letter replay sends back without --force: an intent
// older than this was decided on a cluster that has moved on (the claim it names may be
// another's now, the node it would drain busy again), and the DEADLETTER stream keeps a week.
const defaultReplayMaxAge = time.Hour

// deadLettersReplayCmd publishes the dead letters with the given sequence numbers (or --all)
// again on their original subject, with their original headers (trace context, type) and a
// Nats-Msg-Id of their own, so replaying the same one twice stores it once. A dead letter stored
// longer ago than --max-age is not replayed unless --force is given: each one refused is named
// on stderr, with why, and the command fails after replaying the others. The NATS user needs
// the right to publish on the original subject: the services' users have it for their own.
func deadLettersReplayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("deadletters replay", &o, stderr)
	stream := fs.String("stream", "", "stream the sequence numbers are of (default: the audit stream if there is one, else the DEADLETTER stream)")
	all := fs.Bool("all", false, "replay every stored dead letter (not older than --max-age)")
	maxAge := fs.Duration("max-age", defaultReplayMaxAge, "replay only dead letters stored at most `DURATION` ago; older ones are refused unless --force")
	force := fs.Bool("force", false, "replay dead letters older than --max-age too")
	pos, err := parse(fs, &o, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 && !*all {
		return usagef("deadletters replay needs sequence numbers (see deadletters ls) or --all")
	}
	if len(pos) > 0 && *all {
		return usagef("deadletters replay: sequence numbers or --all, not both")
	}
	var seqs []uint64
	for _, p := range pos {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil || n == 0 {
			return usagef("deadletters replay: %q is not a sequence number", p)
		}
		seqs = append(seqs, n)
	}
	conn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	h := newHistory(conn, *stream)
	srcs, err := h.sources(ctx, []string{conn.Prefix().AllDeadLetters()})
	if err != nil {
		return err
	}
	var letters []stored
	if *all {
		if letters, err = h.read(ctx, []string{conn.Prefix().AllDeadLetters()}, time.Time{}); err != nil {
			return err
		}
	} else {
		if len(srcs) != 1 {
			return fmt.Errorf("dead letters are in %d streams: name one with --stream", len(srcs))
		}
		s, err := conn.JetStream().Stream(ctx, srcs[0].stream)
		if err != nil {
			return err
		}
		for _, seq := range seqs {
			raw, err := s.GetMsg(ctx, seq)
			if err != nil {
				return fmt.Errorf("reading %s #%d: %w", srcs[0].stream, seq, err)
			}
			if !strings.HasPrefix(raw.Subject, strings.TrimSuffix(conn.Prefix().AllDeadLetters(), ">")) {
				return fmt.Errorf("%s #%d is not a dead letter (subject %s)", srcs[0].stream, seq, raw.Subject)
			}
			letters = append(letters, stored{Stream: srcs[0].stream, Seq: seq, Time: raw.Time, Msg: &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}})
		}
	}
	refused := 0
	for _, l := range letters {
		d := deadLetterOf(l)
		if age := time.Since(l.Time); age > *maxAge && !*force {
			fmt.Fprintf(stderr, "refused %s #%d (%s, stored %s ago, older than --max-age %s): what it asks for was decided on a cluster that has moved on; give --force to replay it anyway\n",
				l.Stream, l.Seq, d.Subject, age.Round(time.Second), *maxAge)
			refused++
			continue
		}
		if d.Subject == "" {
			return fmt.Errorf("%s #%d has no %s header: nowhere to replay it to", l.Stream, l.Seq, bus.HeaderOriginalSubject)
		}
		m := nats.NewMsg(d.Subject)
		m.Data = l.Msg.Data
		for k, vs := range l.Msg.Header {
			switch k {
			case bus.HeaderError, bus.HeaderOriginalSubject, bus.HeaderOriginalMsgID, bus.HeaderDeliveries, bus.HeaderMsgID:
				continue
			}
			m.Header[k] = append([]string(nil), vs...)
		}
		m.Header.Set(bus.HeaderMsgID, fmt.Sprintf("replay-%s-%d", l.Stream, l.Seq))
		ack, err := conn.JetStream().PublishMsg(ctx, m)
		if err != nil {
			return fmt.Errorf("replaying %s #%d to %s: %w", l.Stream, l.Seq, d.Subject, err)
		}
		what := "replayed"
		if ack.Duplicate {
			what = "already replayed"
		}
		fmt.Fprintf(stdout, "%s %s #%d to %s (%s #%d)\n", what, l.Stream, l.Seq, d.Subject, ack.Stream, ack.Sequence)
	}
	if refused > 0 {
		return fmt.Errorf("%d dead letter(s) older than --max-age %s not replayed (see above; --force replays them)", refused, *maxAge)
	}
	return nil
}
