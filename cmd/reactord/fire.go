package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/natsbus"
)

func cmdFire(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("fire", "reactord fire --nats URL TAG [JSON] | reactord fire --nats URL --events FILE|-",
		`Publishes one event (like salt-call event.send), or with --events every
event of a file: one {"tag","data"} JSON line (or TAG<tab>JSON) each, or
the multi-line format reactord events prints by default.
An event over the server's max payload is published with its biggest values
(a job's return first) replaced by a marker saying how many bytes were cut,
and reported. When a JetStream stream captures the event subjects (a daemon
run with --jetstream), every event is published with the stream's
acknowledgement (4096 waiting at most); one not acknowledged (a timeout, no
responders while the stream elects a leader) is sent again for up to
--retry-for, de-duplicated by its Nats-Msg-Id, and those the stream refused
or never acknowledged are counted. Otherwise events go out with core NATS,
confirmed by one round trip at the end. A summary goes to stderr. Exit 0
when every event was published (and acknowledged), 1 when some lines were
malformed or could not be published or acknowledged (the others are), 2
on usage or connection errors.`, stderr)
	var nf natsFlags
	nf.register(fs, natsClientUsage)
	file := fs.String("events", "", "publish every event of FILE (- for stdin)")
	aliasFlag(fs, "file", "events")
	hop := fs.Int("hop", 0, "hop count to stamp (reactions that fire events set it)")
	cause := fs.String("cause", "", "cause to stamp (the event or jid that led to this one)")
	retryFor := fs.Duration("retry-for", fireRetryFor, "send an event JetStream did not acknowledge again for up to this long (a stream's leader election takes seconds)")
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	one, ok := fireArgs(fs, &nf, *file, stderr)
	if !ok {
		return exitUsage
	}
	opts, err := nf.ConnOptions("reactord-fire")
	if err != nil {
		fmt.Fprintf(stderr, "fire: %v\n", err)
		return exitUsage
	}
	conn, err := natsbus.Connect(opts)
	if err != nil {
		fmt.Fprintf(stderr, "fire: %v\n", err)
		return exitUsage
	}
	defer conn.Close()
	fr, err := newFirer(ctx, conn, natsbus.Meta{Origin: "reactord-fire", Hop: *hop, Cause: *cause}, *retryFor, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fire: %v\n", err)
		return exitUsage
	}
	if one != nil {
		if err := fr.publish(ctx, *one, ""); err != nil {
			fmt.Fprintf(stderr, "fire: %v\n", err)
			return exitUsage
		}
		return fr.confirm(ctx, 1, one.Tag, exitOK)
	}
	in := stdin
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			fmt.Fprintf(stderr, "fire: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		in = f
	}
	sent, code := fr.publishAll(ctx, in)
	return fr.confirm(ctx, sent, "", code)
}

// fireArgs checks fire's arguments before it connects: a server to
// connect to, a tag or a file, and a single event's JSON data, which it
// returns (nil with --events). false: the error was reported.
func fireArgs(fs *flag.FlagSet, nf *natsFlags, file string, stderr io.Writer) (*event.Event, bool) {
	if _, ok := nf.Find(); !ok {
		fmt.Fprintln(stderr, "fire: "+noServer)
		return nil, false
	}
	if (file == "") == (fs.NArg() == 0) || fs.NArg() > 2 {
		fmt.Fprintln(stderr, "fire: need TAG [JSON] or --events FILE")
		fs.Usage()
		return nil, false
	}
	if file != "" {
		return nil, true
	}
	if strings.TrimSpace(fs.Arg(0)) == "" {
		fmt.Fprintln(stderr, "fire: "+errEmptyTag.Error())
		return nil, false
	}
	data := "{}"
	if fs.NArg() == 2 {
		data = fs.Arg(1)
	}
	d, err := event.DecodeData([]byte(data))
	if err != nil {
		fmt.Fprintf(stderr, "fire: %v\n", err)
		return nil, false
	}
	return &event.Event{Tag: fs.Arg(0), Data: d}, true
}

// firer publishes fire's events.
type firer struct {
	conn     *natsbus.Conn
	pub      *natsbus.Publisher // nil: core NATS
	stream   string             // the JetStream stream that captures events, if any
	retryFor time.Duration
	mark     natsbus.Mark // the connection's before the first core publish
	meta     natsbus.Meta
	limit    int // bytes an event may have before its biggest values are cut
	stderr   io.Writer
	// truncated counts the events published cut.
	truncated int
}

// newFirer returns a firer publishing on conn: through a Publisher that
// retries what gets no acknowledgement for retryFor when a JetStream
// stream captures the event subjects, else with core NATS.
func newFirer(ctx context.Context, conn *natsbus.Conn, meta natsbus.Meta, retryFor time.Duration, stderr io.Writer) (*firer, error) {
	fr := &firer{conn: conn, meta: meta, stderr: stderr, retryFor: retryFor,
		// An event over the server's max payload is published with its
		// biggest values (the job return first) cut, and said so: losing
		// it silently, or stopping a file at it, would be worse.
		limit: conn.MaxPayload() - 1024,
		// Into a JetStream daemon, an event counts once its stream has it:
		// core publishes that a burst outruns are lost without a word.
		stream: conn.EventStream(ctx),
		// Core publishes are confirmed by one round trip at the end,
		// unless the connection was re-established meanwhile.
		mark: conn.Mark()}
	if fr.stream == "" {
		return fr, nil
	}
	var err error
	fr.pub, err = conn.NewPublisher(ctx, natsbus.PublisherOptions{
		MaxBatch: min(fireMaxInFlight/natsbus.DefaultBatchInFlight, natsbus.DefaultBatchMax),
		Retries:  fireRetries, RetryFor: retryFor, Logger: slog.New(slog.DiscardHandler)})
	return fr, err
}

// publish publishes one event; where says where it came from, in the
// line about a cut.
func (fr *firer) publish(ctx context.Context, ev event.Event, where string) error {
	if strings.TrimSpace(ev.Tag) == "" {
		return errEmptyTag
	}
	body, err := event.Envelope(ev)
	if err != nil {
		return err
	}
	if fr.limit > 0 && len(body) > fr.limit {
		out, cuts, err := event.Fit(body, fr.limit)
		if err != nil {
			return err
		}
		keys := make([]string, len(cuts))
		for i, c := range cuts {
			keys[i] = fmt.Sprintf("%s (%d bytes)", c.Key, c.Bytes)
		}
		fmt.Fprintf(fr.stderr, "fire: %s%s: %d bytes exceed the server's max payload of %d; published with %s cut\n",
			where, ev.Tag, len(body), fr.limit+1024, strings.Join(keys, ", "))
		fr.truncated++
		body = out
	}
	m := natsbus.Msg{Tag: ev.Tag, Body: body, Meta: fr.meta}
	if fr.pub != nil {
		return fr.pub.Publish(ctx, m, nil)
	}
	return fr.conn.Publish(ctx, m, natsbus.Core)
}

// publishAll publishes every event read from in; a line that cannot be
// read or published is reported and the others go on (exit 1).
func (fr *firer) publishAll(ctx context.Context, in io.Reader) (sent, code int) {
	code = exitOK
	rr := event.NewRecordReader(in)
	for {
		rec, lineNo, rerr := rr.Next()
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				fmt.Fprintf(fr.stderr, "fire: %v\n", rerr)
				code = exitFound
			}
			break
		}
		ev, err := event.Decode(rec)
		if err != nil {
			fmt.Fprintf(fr.stderr, "fire: line %d: %v\n", lineNo, err)
			code = exitFound
		} else if err := fr.publish(ctx, ev, fmt.Sprintf("line %d: ", lineNo)); err != nil {
			fmt.Fprintf(fr.stderr, "fire: line %d: %v\n", lineNo, err)
			code = exitFound
		} else {
			sent++
		}
	}
	fmt.Fprintf(fr.stderr, "fire: published %d event(s), %d of them cut to fit\n", sent, fr.truncated)
	return sent, code
}

// confirm waits for JetStream's acknowledgements of the sent events, or
// for the core server's round trip, says how it went (tag: the one event
// fired, "" for a file), and returns the exit code.
func (fr *firer) confirm(ctx context.Context, sent int, tag string, code int) int {
	what := fmt.Sprintf("all %d event(s)", sent)
	if tag != "" {
		what = tag
	}
	if fr.pub != nil {
		fr.pub.Close(ctx)
		st := fr.pub.Stats()
		retried := fmt.Sprintf("%d sent again after no acknowledgement (retrying for up to %v)", st.Retried, fr.retryFor)
		if st.Failed > 0 {
			fmt.Fprintf(fr.stderr, "fire: %d of %d event(s) not acknowledged by JetStream stream %s (%d acknowledged); %s\n",
				st.Failed, sent, fr.stream, st.Acked, retried)
			for _, err := range st.Errors {
				fmt.Fprintf(fr.stderr, "fire: %v\n", err)
			}
			return exitFound
		}
		fmt.Fprintf(fr.stderr, "fire: JetStream stream %s acknowledged %s; %s\n", fr.stream, what, retried)
		return code
	}
	if err := fr.conn.FlushSince(ctx, fr.mark); err != nil {
		fmt.Fprintf(fr.stderr, "fire: %d event(s) published but not confirmed by the server: %v\n", sent, err)
		return exitFound
	}
	fmt.Fprintf(fr.stderr, "fire: the server confirmed %s (core NATS)\n", what)
	return code
}

// fireRetries is how many times fire sends again an event that got no
// acknowledgement, however short --retry-for is.
const fireRetries = 3

// fireRetryFor is --retry-for's default: longer than a stream's leader
// election after a node's death (nats-server waits 4 to 9 s before it
// calls one).
const fireRetryFor = 30 * time.Second

// fireMaxInFlight bounds the events fire leaves waiting for JetStream's
// acknowledgement.
const fireMaxInFlight = 4096

// errEmptyTag refuses an event without a tag, which no rule can match and
// Salt never sends.
var errEmptyTag = errors.New("the event tag is empty: give a tag such as myapp/deploy/done")
