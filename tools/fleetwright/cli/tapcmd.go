package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

// tapCmd prints messages as JSON lines until interrupted. Live (the default), it is a plain
// subscription to "<prefix>.>": it sees every message, request/reply included, and takes no
// work from any consumer. With --since it first replays what the streams stored since then
// (--stream picks the stream; default the audit stream, else the work streams) and then follows
// them; --no-follow stops at the end of the history.
func tapCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("tap", &o, stderr)
	subj := fs.String("subject", "", `subject to tap instead of "<prefix>.>"`)
	since := fs.Duration("since", 0, "replay the messages stored in the last `DURATION` (e.g. 1h) first, from the audit stream or the work streams")
	stream := fs.String("stream", "", "with --since: the stream to replay (default: the audit stream if there is one, else the work streams)")
	noFollow := fs.Bool("no-follow", false, "with --since: stop at the end of the history instead of following")
	pos, err := parse(fs, &o, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("tap takes no arguments, got %q", pos)
	}
	if *since < 0 {
		return usagef("--since %s: want a positive duration", *since)
	}
	if (*stream != "" || *noFollow) && *since == 0 {
		return usagef("--stream and --no-follow replay history: give --since too")
	}
	if *subj == "" {
		*subj = subject.Prefix(o.prefix).All()
	} else if err := validPattern(*subj); err != nil {
		return usageError{err.Error()}
	}
	conn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

	if *since > 0 {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		from := time.Now().Add(-*since)
		h := newHistory(conn, *stream)
		fmt.Fprintf(stderr, "tap: replaying %s since %s at %s\n", *subj, from.UTC().Format(time.RFC3339), bus.Redact(o.NATSURL))
		print := func(s stored) error {
			l := Describe(s.Msg, s.Time)
			l.Stream, l.Seq = s.Stream, s.Seq
			return enc.Encode(l)
		}
		if *noFollow {
			msgs, err := h.read(ctx, []string{*subj}, from)
			if err != nil {
				return err
			}
			for _, s := range msgs {
				if err := print(s); err != nil {
					return err
				}
			}
			return nil
		}
		return h.follow(ctx, []string{*subj}, from, print)
	}
	tap, err := Start(conn.NATS(), *subj, stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "tap: listening on %s at %s\n", *subj, bus.Redact(o.NATSURL))
	return tap.Run(ctx)
}

// validPattern checks a subject that may hold wildcards.
func validPattern(s string) error {
	if s == "" {
		return fmt.Errorf("invalid subject: empty")
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		if tok == "" {
			return fmt.Errorf("invalid subject %q: empty token", s)
		}
		if tok == ">" && i != len(toks)-1 {
			return fmt.Errorf("invalid subject %q: '>' must be the last token", s)
		}
	}
	return nil
}
