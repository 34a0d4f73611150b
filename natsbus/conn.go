package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
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
	nc      *nats.Conn
	js      jetstream.JetStream
	prefix  string
	closing atomic.Bool // Close was called: disconnections are expected
	downAt  atomic.Int64

	// streamMu guards the cached answer to "does a stream capture the event
	// subjects?" used by PublishEvent.
	streamMu      sync.Mutex
	streamChecked time.Time
	streamName    string

	// deliverMu serialises PublishDelivered, which watches one inbox for
	// the server's "no responders" answers.
	deliverMu    sync.Mutex
	deliverInbox string
	noResponders chan *nats.Msg
	deliverSeq   uint64
}

// ErrNoSubscriber reports a core publish that no subscriber received (no
// reactord daemon is running, or it is restarting).
var ErrNoSubscriber = errors.New("no subscriber received the event")

// streamCheckInterval is how long PublishEvent trusts its last answer to
// "does a stream capture the event subjects?" before asking the server again.
const streamCheckInterval = 5 * time.Second

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
	c := &Conn{prefix: DefaultPrefix}
	no = append(no, nats.ErrorHandler(slowConsumerHandler(log, opts.SlowConsumer)))
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
func slowConsumerHandler(log *slog.Logger, count func(int64)) nats.ErrHandler {
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
			go func() {
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
			}()
		}
		if k, ok := every.Tick(); ok {
			log.Error("NATS slow consumer: the client dropped events its subscription could not take in time (core NATS has no redelivery; use --jetstream); counted in reactord_dropped_total{reason=\"slow_consumer\"}, logged at most once a minute",
				"subject", sub.Subject, "dropped", n, "reports_since_last_line", k)
		}
	}
}

// Close drains and closes the connection.
func (c *Conn) Close() {
	if c == nil || c.nc == nil {
		return
	}
	c.closing.Store(true)
	_ = c.nc.Drain()
	c.nc.Close()
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

// Meta is reactord's metadata on an event message.
type Meta struct {
	Origin string
	Hop    int
	Cause  string
	MsgID  string
	Sent   time.Time
}

func (m Meta) header() nats.Header {
	h := nats.Header{}
	if m.Origin != "" {
		h.Set(HeaderOrigin, m.Origin)
	}
	if m.Hop > 0 {
		h.Set(HeaderHop, strconv.Itoa(m.Hop))
	}
	if m.Cause != "" {
		h.Set(HeaderCause, m.Cause)
	}
	if m.MsgID != "" {
		h.Set(HeaderMsgID, m.MsgID)
	}
	if !m.Sent.IsZero() {
		h.Set(HeaderSent, strconv.FormatInt(m.Sent.UnixNano(), 10))
	}
	return h
}

func metaOf(h nats.Header) Meta {
	m := Meta{Origin: h.Get(HeaderOrigin), Cause: h.Get(HeaderCause), MsgID: h.Get(HeaderMsgID)}
	m.Hop, _ = strconv.Atoi(h.Get(HeaderHop))
	if ns, err := strconv.ParseInt(h.Get(HeaderSent), 10, 64); err == nil {
		m.Sent = time.Unix(0, ns)
	}
	return m
}

// Publish sends one event envelope (the JSON `{"tag", "data"}`) on the
// tag's subject with core NATS.
func (c *Conn) Publish(tag string, body []byte, meta Meta) error {
	msg := &nats.Msg{Subject: Subject(c.prefix, tag), Data: body, Header: meta.header()}
	if err := c.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("publishing %s: %w", tag, err)
	}
	return nil
}

// PublishStream sends one event to JetStream and waits for the stream's
// acknowledgement; meta.MsgID de-duplicates.
func (c *Conn) PublishStream(ctx context.Context, tag string, body []byte, meta Meta) error {
	msg := &nats.Msg{Subject: Subject(c.prefix, tag), Data: body, Header: meta.header()}
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publishing %s to JetStream: %w", tag, err)
	}
	return nil
}

// PublishStreamAsync sends one event to JetStream without waiting for its
// acknowledgement; Flush or PublishAsyncComplete waits for them.
func (c *Conn) PublishStreamAsync(tag string, body []byte, meta Meta) error {
	msg := &nats.Msg{Subject: Subject(c.prefix, tag), Data: body, Header: meta.header()}
	for {
		_, err := c.js.PublishMsgAsync(msg)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			<-c.js.PublishAsyncComplete()
			continue
		}
		if err != nil {
			return fmt.Errorf("publishing %s to JetStream: %w", tag, err)
		}
		return nil
	}
}

// PublishDelivered publishes one event with core NATS and reports
// ErrNoSubscriber when no subscriber received it, so a bridge can hold the
// event while the daemon restarts instead of losing it. It gives the
// message a reply subject, for which the server answers "no responders"
// at once when nobody is subscribed, and waits one round trip for that
// answer. (Subscribers do not reply; the reply subject is never used
// otherwise.) Any subscriber counts: a `nats sub` on the event subjects
// makes an event look delivered while no daemon runs. A publish whose round
// trip fails is reported as failed although the server may have delivered
// it, so a retry can deliver an event twice (at least once, as core NATS
// has no de-duplication).
func (c *Conn) PublishDelivered(ctx context.Context, tag string, body []byte, meta Meta) error {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	if c.noResponders == nil {
		inbox := c.nc.NewRespInbox()
		ch := make(chan *nats.Msg, 256)
		if _, err := c.nc.ChanSubscribe(inbox+".*", ch); err != nil {
			return fmt.Errorf("publishing %s: %w", tag, err)
		}
		c.deliverInbox, c.noResponders = inbox, ch
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publishing %s: %w", tag, err)
	}
	c.deliverSeq++
	reply := c.deliverInbox + "." + strconv.FormatUint(c.deliverSeq, 10)
	msg := &nats.Msg{Subject: Subject(c.prefix, tag), Reply: reply, Data: body, Header: meta.header()}
	if err := c.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("publishing %s: %w", tag, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	// The server sends "no responders" while it processes the publish,
	// before it answers the flush's PING; the client queues it on ch first.
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("publishing %s: %w", tag, err)
	}
	for {
		select {
		case m := <-c.noResponders:
			if m.Subject == reply && m.Header.Get("Status") == "503" {
				return fmt.Errorf("publishing %s on %s: %w", tag, msg.Subject, ErrNoSubscriber)
			}
			// A late answer to an earlier publish: ignore.
		default:
			return nil
		}
	}
}

// PublishEvent publishes to JetStream (waiting for the stream's
// acknowledgement, de-duplicated by msgID) when a stream captures the event
// subjects, else with core NATS, checking that a subscriber received it
// (PublishDelivered); it implements the bridge's Publisher.
//
// Whether a stream exists is asked of the server (and cached for a few
// seconds), never guessed by trying a JetStream publish first: in core mode
// the daemon's own subscription receives such a publish, dispatches it and
// never answers, so a try-then-fall-back publisher would deliver every event
// several times.
func (c *Conn) PublishEvent(ctx context.Context, tag string, body []byte, msgID string) error {
	if c.EventStream(ctx) == "" {
		return c.PublishDelivered(ctx, tag, body, Meta{MsgID: msgID})
	}
	err := c.PublishStream(ctx, tag, body, Meta{MsgID: msgID})
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		// The stream went away since it was looked up: nobody answered,
		// so nobody received the message either.
		c.forgetStream()
		if c.EventStream(ctx) == "" {
			return c.PublishDelivered(ctx, tag, body, Meta{MsgID: msgID})
		}
	}
	return err
}

// EventStream names the JetStream stream that captures event subjects, or
// returns "" when there is none (or the server has no JetStream). The answer
// is cached for a few seconds.
func (c *Conn) EventStream(ctx context.Context) string {
	c.streamMu.Lock()
	defer c.streamMu.Unlock()
	if !c.streamChecked.IsZero() && time.Since(c.streamChecked) < streamCheckInterval {
		return c.streamName
	}
	name, known := c.streamBySubject(ctx, c.prefix+">")
	if !known {
		// A timeout or a lost connection says nothing about the stream:
		// keep the last answer and ask again next time.
		return c.streamName
	}
	c.streamName = name
	c.streamChecked = time.Now()
	return c.streamName
}

func (c *Conn) forgetStream() {
	c.streamMu.Lock()
	c.streamChecked = time.Time{}
	c.streamMu.Unlock()
}

// Connected reports whether the connection is up (not reconnecting).
func (c *Conn) Connected() bool { return c.nc.IsConnected() }

// JetStreamReady reports whether JetStream answers and can place a stream
// on replicas servers: on a cluster, once its nodes elected a meta leader
// and it sees them all. With replicas above 1 it creates and deletes a
// small stream in memory to find out.
func (c *Conn) JetStreamReady(ctx context.Context, replicas int) error {
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	if replicas <= 1 {
		return nil
	}
	name := "REACTORD_READY_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"reactord.ready." + name}, Storage: jetstream.MemoryStorage, Replicas: replicas}); err != nil {
		return fmt.Errorf("JetStream: a stream on %d servers: %w", replicas, err)
	}
	if err := c.js.DeleteStream(ctx, name); err != nil {
		return fmt.Errorf("JetStream: deleting the probe stream %s: %w", name, err)
	}
	return nil
}

// MaxPayload is the largest message (headers and body) the connected server
// accepts, in bytes; 0 while it is not known.
func (c *Conn) MaxPayload() int { return int(c.nc.MaxPayload()) }

// StreamCaptures reports whether a JetStream stream captures subject.
// known is false when the server could not be asked (a timeout, a lost
// connection): the answer then says nothing.
func (c *Conn) StreamCaptures(ctx context.Context, subject string) (captured, known bool) {
	name, known := c.streamBySubject(ctx, subject)
	return name != "", known
}

// streamBySubject names the stream that captures subject ("" for none);
// known is false when the server could not be asked.
func (c *Conn) streamBySubject(ctx context.Context, subject string) (name string, known bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	name, err := c.js.StreamNameBySubject(ctx, subject)
	switch {
	case err == nil:
		return name, true
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return "", true
	}
	return "", false
}

// PublishStored publishes bytes on a subject a JetStream stream captures
// and waits for the stream to acknowledge them (stored on its replicas); a
// meta.MsgID the stream saw within its duplicate window is dropped there.
func (c *Conn) PublishStored(ctx context.Context, subject string, body []byte, meta Meta) error {
	if _, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: body, Header: meta.header()}); err != nil {
		return fmt.Errorf("publishing %s to JetStream: %w", subject, err)
	}
	return nil
}

// PublishRaw publishes bytes on any subject (dead letters, custom executors).
func (c *Conn) PublishRaw(subject string, body []byte, meta Meta) error {
	return c.nc.PublishMsg(&nats.Msg{Subject: subject, Data: body, Header: meta.header()})
}

// Message is one received event.
type Message struct {
	// Subject is the NATS subject.
	Subject string
	// Body is the envelope JSON.
	Body []byte
	// Meta is reactord's metadata from the headers.
	Meta Meta
	// Received is when the message arrived.
	Received time.Time
	// Seq is the message's stream sequence (JetStream; 0 for core
	// messages).
	Seq uint64
	ack func() error
	nak func() error
	// moved reports that the message's partition left this replica.
	moved func() bool
}

// Settlers settle a JetStream message (NewMessage): Ack and Nak it;
// Moved, when set, reports that its partition left this replica.
type Settlers struct {
	Ack, Nak func() error
	Moved    func() bool
}

// NewMessage returns a message a JetStream consumer (package consume)
// received, with its stream sequence and what settles it.
func NewMessage(subject string, body []byte, h nats.Header, received time.Time, seq uint64, s Settlers) *Message {
	return &Message{Subject: subject, Body: body, Meta: metaOf(h), Received: received, Seq: seq, ack: s.Ack, nak: s.Nak, moved: s.Moved}
}

// Moved reports whether the message's partition (ConsumePartitioned) left
// this replica since the message was taken: handling it now could run
// alongside the partition's new owner, which takes it again. Always false
// for other messages.
func (m *Message) Moved() bool { return m.moved != nil && m.moved() }

// Ack acknowledges a JetStream message; it is a no-op for core messages.
func (m *Message) Ack() error {
	if m.ack == nil {
		return nil
	}
	return m.ack()
}

// Nak asks JetStream to redeliver the message; a no-op for core messages.
func (m *Message) Nak() error {
	if m.nak == nil {
		return nil
	}
	return m.nak()
}

// Subscription stops a subscription or consumer.
type Subscription interface {
	Stop()
}

type subFunc func()

func (f subFunc) Stop() { f() }

// SubscribeQueue receives events matching filter (a NATS subject filter,
// default `salt.evt.>`) in a queue group, so replicas share the load.
// handler runs on the subscription's goroutine, in order.
func (c *Conn) SubscribeQueue(filter, queue string, handler func(*Message)) (Subscription, error) {
	if filter == "" {
		filter = c.prefix + ">"
	}
	sub, err := c.nc.QueueSubscribe(filter, queue, func(m *nats.Msg) {
		handler(&Message{Subject: m.Subject, Body: m.Data, Meta: metaOf(m.Header), Received: time.Now()})
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", filter, err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	return subFunc(func() { _ = sub.Drain() }), nil
}

// Subscribe receives every event matching filter (no queue group).
func (c *Conn) Subscribe(filter string, handler func(*Message)) (Subscription, error) {
	if filter == "" {
		filter = c.prefix + ">"
	}
	sub, err := c.nc.Subscribe(filter, func(m *nats.Msg) {
		handler(&Message{Subject: m.Subject, Body: m.Data, Meta: metaOf(m.Header), Received: time.Now()})
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", filter, err)
	}
	return subFunc(func() { _ = sub.Unsubscribe() }), nil
}

// SubscribeRaw receives every message on subject (any subject, e.g. the
// nats driver's or the dead-letter subject).
func (c *Conn) SubscribeRaw(subject string, handler func(subject string, body []byte, meta Meta)) (Subscription, error) {
	sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) { handler(m.Subject, m.Data, metaOf(m.Header)) })
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	return subFunc(func() { _ = sub.Unsubscribe() }), nil
}

// StreamOptions configure the JetStream stream and durable consumer.
type StreamOptions struct {
	// Stream is the stream name (default REACTORD_EVENTS).
	Stream string
	// Durable is the shared durable consumer's name (default reactord).
	Durable string
	// MaxAckPending bounds unacknowledged messages per consumer.
	MaxAckPending int
	// AckWait is how long a delivered message may stay unacknowledged
	// before redelivery (default 30s).
	AckWait time.Duration
	// Duplicates is the de-duplication window for Nats-Msg-Id: a message
	// whose id the stream stored less than this long ago is dropped. It
	// only has to cover a publish retry or a second bridge on the same
	// master (the bridge's id includes the master's _stamp). Zero means 2
	// minutes for a new stream and leaves an existing stream's window as it
	// is; a positive value is also applied to an existing stream.
	Duplicates time.Duration
	// MaxAge bounds how long the stream keeps an event not acknowledged
	// (default 24h). A new stream is a work queue (an event leaves it once
	// the shared consumer acknowledged it), or with Partitioned keeps an
	// event until every partition's consumer acknowledged it (interest
	// retention): either way the server's disk and memory hold the
	// backlog, not a day of traffic (the audit store is the record).
	MaxAge time.Duration
	// Replicas is how many servers of a NATS cluster keep the stream (1,
	// 3 or 5 in practice; at most the cluster's size). Zero means 1 for a
	// new stream and leaves an existing stream's replicas as they are; a
	// positive value is also applied to an existing stream (the server
	// adds or removes the copies), and the change is logged.
	Replicas int
	// Progress makes Consume send progress acknowledgements for the
	// messages it holds (delivered, neither acknowledged nor refused) for
	// half of AckWait or more, every quarter of AckWait, so that a backlog
	// in a live replica is not redelivered to another one. Without it a
	// message held longer than AckWait is redelivered.
	Progress bool
	// CheckEvery is how often Consume checks that its stream and consumer
	// still exist (default 5s).
	CheckEvery time.Duration
	// Partitioned is set when partition consumers read the stream
	// (ConsumePartitioned): EnsureStream then creates a new stream with
	// interest retention, which allows several consumers, and refuses a
	// work-queue stream.
	Partitioned bool
	// Logger receives Consume's reports (a lost stream or consumer); nil
	// discards them.
	Logger *slog.Logger
}

// Defaults fills in the stream settings left empty.
func (o *StreamOptions) Defaults() {
	if o.Stream == "" {
		o.Stream = "REACTORD_EVENTS"
	}
	if o.Durable == "" {
		o.Durable = "reactord"
	}
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = 4096
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.Duplicates <= 0 {
		o.Duplicates = 2 * time.Minute
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 24 * time.Hour
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 5 * time.Second
	}
}

// SharedConsumer is the configuration of the durable consumer replicas
// share.
func (o *StreamOptions) SharedConsumer() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       o.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxAckPending: o.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// ErrWorkQueueStream is returned by EnsureStream when partition consumers
// would read a work-queue stream, which allows one consumer only.
var ErrWorkQueueStream = errors.New("the stream is a work queue (made for one shared consumer): partitions need a stream with interest retention; stop the replicas once it is drained, delete it (nats stream rm) and start them with partitions, which create it so")

// EnsureStream creates the event stream when it is absent (see MaxAge and
// Partitioned for its retention: a work queue keeps events until a
// consumer takes them; with interest retention, ConsumePartitioned
// creates its consumers right after). It sets an
// existing stream's duplicate window and replicas to o.Duplicates and
// o.Replicas when those are set and differ (its other settings are left
// alone); a change of replicas is logged to o.Logger.
func (c *Conn) EnsureStream(ctx context.Context, o StreamOptions) error {
	window, replicas := o.Duplicates, o.Replicas
	o.Defaults()
	s, err := c.js.Stream(ctx, o.Stream)
	if err == nil {
		if window <= 0 && replicas <= 0 && !o.Partitioned {
			return nil
		}
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("looking up stream %s: %w", o.Stream, err)
		}
		if o.Partitioned && info.Config.Retention == jetstream.WorkQueuePolicy {
			return fmt.Errorf("stream %s: %w", o.Stream, ErrWorkQueueStream)
		}
		cfg := info.Config
		if window > 0 {
			cfg.Duplicates = window
		}
		if replicas > 0 {
			cfg.Replicas = replicas
		}
		if cfg.Duplicates == info.Config.Duplicates && cfg.Replicas == max(info.Config.Replicas, 1) {
			return nil
		}
		if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("updating stream %s (duplicate window %v, was %v; replicas %d, was %d): %w",
				o.Stream, cfg.Duplicates, info.Config.Duplicates, cfg.Replicas, max(info.Config.Replicas, 1), err)
		}
		if cfg.Replicas != max(info.Config.Replicas, 1) && o.Logger != nil {
			o.Logger.Warn("JetStream stream replicas changed", "stream", o.Stream, "replicas", cfg.Replicas, "was", max(info.Config.Replicas, 1))
		}
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("looking up stream %s: %w", o.Stream, err)
	}
	retention := jetstream.WorkQueuePolicy
	if o.Partitioned {
		retention = jetstream.InterestPolicy
	}
	_, err = c.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       o.Stream,
		Subjects:   []string{c.prefix + ">"},
		Retention:  retention,
		Storage:    jetstream.FileStorage,
		Duplicates: o.Duplicates,
		MaxAge:     o.MaxAge,
		Replicas:   max(o.Replicas, 1),
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("creating stream %s: %w", o.Stream, err)
	}
	return nil
}

// StreamInfo reports a stream's message count.
func (c *Conn) StreamMessages(ctx context.Context, stream string) (uint64, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// DeadLetter publishes a reaction that failed for good on subject, with the
// error, for inspection and replay.
func (c *Conn) DeadLetter(subject string, a actions.Action, cause error) {
	body := []byte(`{"tag":`)
	body, _ = event.AppendJSON(body, a.Tag)
	body = append(body, `,"chunk":`...)
	body, _ = event.AppendJSON(body, a.Chunk)
	body = append(body, `,"error":`...)
	body, _ = event.AppendJSON(body, cause.Error())
	body = append(body, '}')
	_ = c.PublishRaw(subject, body, Meta{Cause: a.Tag})
}

// NATS returns the underlying nats.go connection, for the packages that
// build on Conn (consumers, key-value state, the nats driver).
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream returns the connection's JetStream context.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }
