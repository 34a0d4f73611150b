package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/ratelog"
	"github.com/reactord/reactord/internal/redact"
)

// Headers carried by reactord's own messages.
const (
	// HeaderOrigin names the reactord instance or tool that published.
	HeaderOrigin = "Reactord-Origin"
	// HeaderHop counts how many reactions led to this event.
	HeaderHop = "Reactord-Hop"
	// HeaderCause identifies the event (or jid) whose reaction published it.
	HeaderCause = "Reactord-Cause"
	// HeaderSent carries the publisher's send time (Unix nanoseconds), for
	// latency measurements.
	HeaderSent = "Reactord-Sent"
	// HeaderMsgID is JetStream's de-duplication header.
	HeaderMsgID = "Nats-Msg-Id"
)

// ConnOptions configure a client connection.
type ConnOptions struct {
	// URL is a NATS URL or a comma-separated list of them.
	URL string
	// Name identifies the connection on the server.
	Name string
	// Token, User/Password, NKeyFile (a seed file) and CredsFile (a .creds
	// file) are the supported authentications.
	Token, User, Password string
	NKeyFile, CredsFile   string
	// CAFile, CertFile, KeyFile configure TLS.
	CAFile, CertFile, KeyFile string
	// AuthHint is added to the error when the server refuses the
	// connection's credentials (or their absence): what to do about it.
	AuthHint string
	// NoReconnectBuffer makes publishes fail while disconnected instead of
	// being buffered (the bridge counts failures itself).
	NoReconnectBuffer bool
	// Logger receives a line when the connection is lost, one when it is
	// back (with how long it was down) and one if it closes for good; nil
	// means slog.Default().
	Logger *slog.Logger
	// SlowConsumer, when set, is called with the number of messages the
	// client dropped because a subscription's pending buffer was full (a
	// slow core subscriber). Such drops are also logged at most once a
	// minute.
	SlowConsumer func(dropped int64)
}

// Conn is a NATS connection.
type Conn struct {
	// afterPublish, when a test sets it, runs in Marked right after the
	// publish.
	afterPublish func()

	nc      *nats.Conn
	js      jetstream.JetStream
	prefix  string
	closing atomic.Bool // Close was called: disconnections are expected
	// saidWorkQueue: EnsureStream has logged that the event stream is a
	// work queue (once per connection, not at every consumer restart).
	saidWorkQueue atomic.Bool
	// saidInterest: EnsureStream has logged that the partitions' stream
	// has interest retention (made by an earlier reactord).
	saidInterest atomic.Bool
	downAt       atomic.Int64

	// streamMu guards the cached answer to "does a stream capture the event
	// subjects?" used by Publish with Event; streamAsking is closed when the
	// question under way (asked without the lock) is answered.
	streamMu      sync.Mutex
	streamChecked time.Time
	streamName    string
	streamAsking  chan struct{}

	// deliverMu guards the inbox of Delivered publishes (subscribed to once) and
	// its publishes waiting for the server's "no responders" answer, by
	// reply subject (true: answered). It is never held while talking to
	// the server.
	deliverMu      sync.Mutex
	deliverInbox   string
	noResponders   chan *nats.Msg
	deliverWaiting map[string]bool
	deliverSeq     atomic.Uint64

	// log is the connection's logger (ConnOptions.Logger).
	log *slog.Logger

	// watchers are the slow-subscription watchers (slowConsumerHandler);
	// Close waits for them.
	watchers sync.WaitGroup
}

// Connect opens a connection and reconnects forever after a disconnection;
// the initial connection is not retried.
func Connect(opts ConnOptions) (*Conn, error) {
	no := []nats.Option{nats.Name(opts.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(false)}
	if opts.Token != "" {
		no = append(no, nats.Token(opts.Token))
	}
	if opts.User != "" {
		no = append(no, nats.UserInfo(opts.User, opts.Password))
	}
	if opts.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(opts.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nkey seed %s: %w", opts.NKeyFile, err)
		}
		no = append(no, o)
	}
	if opts.CredsFile != "" {
		no = append(no, nats.UserCredentials(opts.CredsFile))
	}
	if opts.CAFile != "" {
		no = append(no, nats.RootCAs(opts.CAFile))
	}
	if opts.CertFile != "" || opts.KeyFile != "" {
		no = append(no, nats.ClientCert(opts.CertFile, opts.KeyFile))
	}
	if opts.NoReconnectBuffer {
		no = append(no, nats.ReconnectBufSize(-1))
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Conn{prefix: DefaultPrefix, log: log}
	no = append(no, nats.ErrorHandler(slowConsumerHandler(log, opts.SlowConsumer, &c.watchers)))
	no = append(no,
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if c.closing.Load() {
				return
			}
			c.downAt.Store(time.Now().UnixNano())
			log.Warn("NATS connection lost; reconnecting", "server", nc.ConnectedUrlRedacted(), "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			attrs := []any{"server", nc.ConnectedUrlRedacted()}
			if at := c.downAt.Swap(0); at != 0 {
				attrs = append(attrs, "outage", time.Since(time.Unix(0, at)).Round(time.Millisecond))
			}
			log.Info("NATS connection back", attrs...)
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if !c.closing.Load() {
				log.Error("NATS connection closed for good", "error", nc.LastError())
			}
		}),
	)
	nc, err := nats.Connect(opts.URL, no...)
	if err != nil {
		if opts.AuthHint != "" && errors.Is(err, nats.ErrAuthorization) {
			return nil, fmt.Errorf("connecting to NATS at %s: %w: %s", redact.URLs(opts.URL), err, opts.AuthHint)
		}
		return nil, fmt.Errorf("connecting to NATS at %s: %w", redact.URLs(opts.URL), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c.nc, c.js = nc, js
	return c, nil
}

// slowConsumerPoll is how often a slow subscription's drops are counted.
const slowConsumerPoll = 250 * time.Millisecond

// slowConsumerHandler returns the connection's asynchronous error
// handler: it counts the messages a slow subscription dropped (the growth
// of its Dropped count since the last call) and logs at most once a
// minute; other asynchronous errors (a permission refused) are logged at
// most once a minute too.
// Each watcher runs in watchers until its subscription ends.
func slowConsumerHandler(log *slog.Logger, count func(int64), watchers *sync.WaitGroup) nats.ErrHandler {
	var mu sync.Mutex
	seen := map[*nats.Subscription]int{}
	every, other := ratelog.New(time.Minute), ratelog.New(time.Minute)
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if !errors.Is(err, nats.ErrSlowConsumer) || sub == nil {
			if k, ok := other.Tick(); ok {
				log.Warn("NATS asynchronous error (logged at most once a minute)", "error", err, "errors_since_last_line", k)
			}
			return
		}
		// The client reports a slow subscription once when it starts
		// dropping, and again only after it caught up: a watcher counts
		// the drops in between (the growth of its Dropped count) until
		// the subscription ends.
		n, _ := sub.Dropped()
		mu.Lock()
		_, watching := seen[sub]
		if !watching {
			seen[sub] = 0
		}
		mu.Unlock()
		if !watching {
			watchers.Go(func() {
				t := time.NewTicker(slowConsumerPoll)
				defer t.Stop()
				for {
					d, err := sub.Dropped()
					mu.Lock()
					delta := d - seen[sub]
					if err == nil && delta > 0 {
						seen[sub] = d
					}
					mu.Unlock()
					if err == nil && delta > 0 && count != nil {
						count(int64(delta))
					}
					if err != nil || !sub.IsValid() {
						mu.Lock()
						delete(seen, sub)
						mu.Unlock()
						return
					}
					<-t.C
				}
			})
		}
		if k, ok := every.Tick(); ok {
			log.Error(msgSlowConsumer, "subject", sub.Subject, "dropped", n, "reports_since_last_line", k,
				"why", "the subscription could not take them in time, and core NATS has no redelivery",
				"fix", "use --jetstream; logged at most once a minute",
				"metric", `reactord_dropped_total{reason="slow_consumer"}`)
		}
	}
}

// msgSlowConsumer is the line about events a slow subscription dropped.
const msgSlowConsumer = "NATS slow consumer: the client dropped events"

// Close drains and closes the connection.
func (c *Conn) Close() {
	if c == nil || c.nc == nil {
		return
	}
	c.closing.Store(true)
	_ = c.nc.Drain()
	c.nc.Close()
	// Their subscriptions are closed now: each watcher sees it at its
	// next look (slowConsumerPoll).
	c.watchers.Wait()
}

// Flush waits until the server has processed everything published.
func (c *Conn) Flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	return c.nc.FlushWithContext(ctx)
}

// Connected reports whether the connection is up (not reconnecting).
func (c *Conn) Connected() bool { return c.nc.IsConnected() }

// MaxPayload is the largest message (headers and body) the connected server
// accepts, in bytes; 0 while it is not known.
func (c *Conn) MaxPayload() int { return int(c.nc.MaxPayload()) }

// NATS returns the underlying nats.go connection, for the packages that
// build on Conn (consumers, key-value state, the nats driver).
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream returns the connection's JetStream context.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// Prefix is the subject prefix of the events (DefaultPrefix unless the
// connection was made with another).
func (c *Conn) Prefix() string { return c.prefix }
