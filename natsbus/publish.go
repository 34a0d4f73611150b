package natsbus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/event"
)

// ErrNoSubscriber reports a core publish that no subscriber received (no
// reactord daemon is running, or it is restarting).
var ErrNoSubscriber = errors.New("no subscriber received the event")

// streamCheckInterval is how long Publish with Event trusts its last answer to
// "does a stream capture the event subjects?" before asking the server again.
const streamCheckInterval = 5 * time.Second

// Meta is reactord's metadata on an event message.
type Meta struct {
	Origin string
	Hop    int
	Cause  string
	MsgID  string
	Sent   time.Time
	// Key is the event's ordering key for a JetStream publish (see
	// KeyedSubject); empty: event.EnvelopeOrderKey of the body.
	Key string
}

// streamSubject is the subject of an event published to JetStream: keyed
// by meta.Key, else by the envelope's ordering key.
func (c *Conn) streamSubject(tag string, body []byte, meta Meta) string {
	key := meta.Key
	if key == "" {
		key = event.EnvelopeOrderKey(body, tag)
	}
	return KeyedSubject(c.prefix, tag, key)
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

// How says how Conn.Publish sends a message, and what its success means.
// A Publisher sends many at once, Stored or Event.
type How int

const (
	// Core publishes with core NATS and returns once the message is in
	// the connection's buffer: fire-and-forget, nothing says a server got
	// it.
	Core How = iota + 1
	// Confirmed publishes with core NATS and makes one round trip to the
	// server (FlushSince): it fails with ErrReconnected when the
	// connection was re-established meanwhile, as the message may have
	// died with the old one.
	Confirmed
	// Delivered publishes with core NATS and reports ErrNoSubscriber when
	// no subscriber received it, so a bridge can hold the event while the
	// daemon restarts instead of losing it. The message gets a reply
	// subject, for which the server answers "no responders" at once when
	// nobody is subscribed, and the publish waits one round trip for that
	// answer (5 s when ctx has no deadline). (Subscribers do not reply;
	// the reply subject is never used otherwise.) Any subscriber counts: a
	// `nats sub` on the event subjects makes an event look delivered while
	// no daemon runs. A publish whose round trip fails, or that the
	// connection's re-establishment may have lost (ErrReconnected, see
	// FlushSince), is reported as failed although the server may have
	// delivered it, so a retry can deliver an event twice (at least once,
	// as core NATS has no de-duplication). Concurrent calls wait for
	// their round trips at once: no lock is held while the server answers.
	Delivered
	// Stored publishes to JetStream and waits for the stream's
	// acknowledgement (stored on its replicas); a Meta.MsgID the stream
	// saw within its duplicate window is dropped there. An event (Msg.Tag)
	// goes on its keyed subject (see KeyedSubject).
	Stored
	// Event is Stored when a JetStream stream captures the event subjects,
	// else Delivered: how the bridge publishes. Whether a stream exists is
	// asked of the server (and cached for a few seconds, see
	// EventStream), never guessed by trying a JetStream publish first: in
	// core mode the daemon's own subscription receives such a publish,
	// dispatches it and never answers, so a try-then-fall-back publisher
	// would deliver every event several times.
	Event
)

// String names the way of publishing.
func (h How) String() string {
	switch h {
	case Core:
		return "core"
	case Confirmed:
		return "confirmed"
	case Delivered:
		return "delivered"
	case Stored:
		return "stored"
	case Event:
		return "event"
	}
	return "How(" + strconv.Itoa(int(h)) + ")"
}

// Msg is one message to publish: an event envelope (the JSON `{"tag",
// "data"}`) by its Tag, on the tag's subject (its keyed subject in a
// stream), or any bytes on Subject (dead letters, custom executors).
type Msg struct {
	// Tag is the event's tag; its subject is made from it and the
	// connection's prefix. Ignored when Subject is set.
	Tag string
	// Subject, when set, is the exact subject.
	Subject string
	// Body is the message's payload.
	Body []byte
	// Meta becomes the message's headers.
	Meta Meta
}

// name is how errors name the message: its tag, else its subject.
func (m Msg) name() string {
	if m.Subject != "" && m.Tag == "" {
		return m.Subject
	}
	return m.Tag
}

// coreSubject is the message's subject with core NATS.
func (c *Conn) coreSubject(m Msg) string {
	if m.Subject != "" {
		return m.Subject
	}
	return Subject(c.prefix, m.Tag)
}

// storedSubject is the message's subject in a stream: an event's keyed
// subject (by Meta.Key, else its envelope's ordering key).
func (c *Conn) storedSubject(m Msg) string {
	if m.Subject != "" {
		return m.Subject
	}
	return c.streamSubject(m.Tag, m.Body, m.Meta)
}

// errNoTarget refuses a Msg with neither a tag nor a subject.
var errNoTarget = errors.New("publishing: the message has neither a tag nor a subject")

// Publish sends one message the way how says and returns once that is
// done (see How): in the connection's buffer, confirmed by the server,
// received by a subscriber, or stored in a stream. It is the one way to
// publish a message at a time; a Publisher keeps many in flight.
func (c *Conn) Publish(ctx context.Context, m Msg, how How) error {
	if m.Tag == "" && m.Subject == "" {
		return errNoTarget
	}
	switch how {
	case Core:
		if err := c.nc.PublishMsg(&nats.Msg{Subject: c.coreSubject(m), Data: m.Body, Header: m.Meta.header()}); err != nil {
			return fmt.Errorf("publishing %s: %w", m.name(), err)
		}
		return nil
	case Confirmed:
		mark, err := c.Marked(func() error { return c.Publish(ctx, m, Core) })
		if err != nil {
			return err
		}
		if err := c.FlushSince(ctx, mark); err != nil {
			return fmt.Errorf("confirming %s: %w", m.name(), err)
		}
		return nil
	case Delivered:
		return c.publishDelivered(ctx, m)
	case Stored:
		msg := &nats.Msg{Subject: c.storedSubject(m), Data: m.Body, Header: m.Meta.header()}
		if _, err := c.js.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("publishing %s to JetStream: %w", m.name(), err)
		}
		return nil
	case Event:
		return c.publishEvent(ctx, m)
	}
	return fmt.Errorf("publishing %s: unknown way %v", m.name(), how)
}

// publishDelivered is Publish with Delivered.
func (c *Conn) publishDelivered(ctx context.Context, m Msg) error {
	inbox, err := c.deliverInboxSub()
	if err != nil {
		return fmt.Errorf("publishing %s: %w", m.name(), err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publishing %s: %w", m.name(), err)
	}
	reply := inbox + "." + strconv.FormatUint(c.deliverSeq.Add(1), 10)
	c.deliverMu.Lock()
	c.deliverWaiting[reply] = false
	c.deliverMu.Unlock()
	defer func() {
		c.deliverMu.Lock()
		delete(c.deliverWaiting, reply)
		c.deliverMu.Unlock()
	}()
	msg := &nats.Msg{Subject: c.coreSubject(m), Reply: reply, Data: m.Body, Header: m.Meta.header()}
	mark, err := c.Marked(func() error { return c.nc.PublishMsg(msg) })
	if err != nil {
		return fmt.Errorf("publishing %s: %w", m.name(), err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	// The server sends "no responders" while it processes the publish,
	// before it answers the flush's PING; the client's reading goroutine
	// puts it on the inbox's channel before it takes the PONG.
	if err := c.FlushSince(ctx, mark); err != nil {
		return fmt.Errorf("publishing %s: %w", m.name(), err)
	}
	if c.noResponder(reply) {
		return fmt.Errorf("publishing %s on %s: %w", m.name(), msg.Subject, ErrNoSubscriber)
	}
	return nil
}

// deliverInboxSub returns the inbox Delivered publishes' reply subjects are
// under, subscribing to it the first time (outside deliverMu: a
// subscription goes to the server; a caller that lost the race drops its
// own).
func (c *Conn) deliverInboxSub() (string, error) {
	c.deliverMu.Lock()
	inbox := c.deliverInbox
	c.deliverMu.Unlock()
	if inbox != "" {
		return inbox, nil
	}
	inbox = c.nc.NewRespInbox()
	ch := make(chan *nats.Msg, noResponderBuffer)
	sub, err := c.nc.ChanSubscribe(inbox+".*", ch)
	if err != nil {
		return "", err
	}
	c.deliverMu.Lock()
	if c.deliverInbox != "" {
		inbox = c.deliverInbox
		c.deliverMu.Unlock()
		_ = sub.Unsubscribe()
		return inbox, nil
	}
	c.deliverInbox, c.noResponders, c.deliverWaiting = inbox, ch, map[string]bool{}
	c.deliverMu.Unlock()
	return inbox, nil
}

// noResponderBuffer is how many "no responders" answers the inbox's
// channel holds: each Delivered publish takes those waiting after its
// flush, so it holds about one per publish under way. Past it (more
// publishes under way at once than that), the client drops an answer as a
// slow consumer (logged and counted in reactord_dropped_total
// {reason="slow_consumer"}), and the publish it answered is taken for
// delivered.
const noResponderBuffer = 4096

// noResponder reports whether the server answered "no responders" to the
// publish with reply subject reply: it takes every answer received so far
// from the inbox's channel and marks the publish it answers (an answer to
// a publish no longer waiting is dropped), then reads reply's mark. It
// never waits; deliverMu is held only while the received answers are
// sorted, so that an answer another caller took is marked before this one
// reads its own.
func (c *Conn) noResponder(reply string) bool {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	for {
		select {
		case m := <-c.noResponders:
			if _, waiting := c.deliverWaiting[m.Subject]; waiting && m.Header.Get("Status") == "503" {
				c.deliverWaiting[m.Subject] = true
			}
			continue
		default:
		}
		return c.deliverWaiting[reply]
	}
}

// publishEvent is Publish with Event.
func (c *Conn) publishEvent(ctx context.Context, m Msg) error {
	if c.EventStream(ctx) == "" {
		return c.publishDelivered(ctx, m)
	}
	err := c.Publish(ctx, m, Stored)
	if streamGone(err) {
		// The stream went away since it was looked up: nobody answered,
		// so nobody received the message either.
		c.forgetStream()
		if c.EventStream(ctx) == "" {
			return c.publishDelivered(ctx, m)
		}
	}
	return err
}

// streamGone reports a JetStream publish that no stream answered: the
// stream went away (or has no leader yet).
func streamGone(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// EventStream names the JetStream stream that captures event subjects, or
// returns "" when there is none (or the server has no JetStream). The answer
// is cached for a few seconds.
func (c *Conn) EventStream(ctx context.Context) string {
	for {
		c.streamMu.Lock()
		if !c.streamChecked.IsZero() && time.Since(c.streamChecked) < streamCheckInterval {
			name := c.streamName
			c.streamMu.Unlock()
			return name
		}
		if asking := c.streamAsking; asking != nil {
			// Another caller asks the server: wait for its answer.
			last := c.streamName
			c.streamMu.Unlock()
			select {
			case <-asking:
				continue
			case <-ctx.Done():
				return last
			}
		}
		asking := make(chan struct{})
		c.streamAsking = asking
		c.streamMu.Unlock()
		name, known := c.streamBySubject(ctx, c.prefix+">") // no lock held while the server answers
		c.streamMu.Lock()
		c.streamAsking = nil
		close(asking)
		if known {
			c.streamName, c.streamChecked = name, time.Now()
		}
		// Unknown (a timeout or a lost connection says nothing about the
		// stream): keep the last answer and ask again next time.
		name = c.streamName
		c.streamMu.Unlock()
		return name
	}
}

func (c *Conn) forgetStream() {
	c.streamMu.Lock()
	c.streamChecked = time.Time{}
	c.streamMu.Unlock()
}

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
