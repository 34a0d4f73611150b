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

// streamCheckInterval is how long PublishEvent trusts its last answer to
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

// Publish sends one event envelope (the JSON `{"tag", "data"}`) on the
// tag's subject with core NATS.
func (c *Conn) Publish(tag string, body []byte, meta Meta) error {
	msg := &nats.Msg{Subject: Subject(c.prefix, tag), Data: body, Header: meta.header()}
	if err := c.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("publishing %s: %w", tag, err)
	}
	return nil
}

// PublishStream sends one event to JetStream, on its keyed subject (see
// KeyedSubject), and waits for the stream's acknowledgement; meta.MsgID
// de-duplicates.
func (c *Conn) PublishStream(ctx context.Context, tag string, body []byte, meta Meta) error {
	msg := &nats.Msg{Subject: c.streamSubject(tag, body, meta), Data: body, Header: meta.header()}
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publishing %s to JetStream: %w", tag, err)
	}
	return nil
}

// PublishStreamAsync sends one event to JetStream, on its keyed subject,
// without waiting for its acknowledgement; Flush or PublishAsyncComplete
// waits for them.
func (c *Conn) PublishStreamAsync(tag string, body []byte, meta Meta) error {
	msg := &nats.Msg{Subject: c.streamSubject(tag, body, meta), Data: body, Header: meta.header()}
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
// trip fails, or that the connection's re-establishment may have lost
// (ErrReconnected, see FlushSince), is reported as failed although the
// server may have delivered it, so a retry can deliver an event twice (at
// least once, as core NATS has no de-duplication). Concurrent calls wait
// for their round trips at once: no lock is held while the server
// answers.
func (c *Conn) PublishDelivered(ctx context.Context, tag string, body []byte, meta Meta) error {
	inbox, err := c.deliverInboxSub()
	if err != nil {
		return fmt.Errorf("publishing %s: %w", tag, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publishing %s: %w", tag, err)
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
	msg := &nats.Msg{Subject: Subject(c.prefix, tag), Reply: reply, Data: body, Header: meta.header()}
	mark, err := c.marked(func() error { return c.nc.PublishMsg(msg) })
	if err != nil {
		return fmt.Errorf("publishing %s: %w", tag, err)
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
		return fmt.Errorf("publishing %s: %w", tag, err)
	}
	if c.noResponder(reply) {
		return fmt.Errorf("publishing %s on %s: %w", tag, msg.Subject, ErrNoSubscriber)
	}
	return nil
}

// deliverInboxSub returns the inbox PublishDelivered's reply subjects are
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
// channel holds: each PublishDelivered takes those waiting after its
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

// PublishEventAsync is PublishEvent without the wait, for a publisher
// that keeps many events in flight (the bridge's outbox): to JetStream it
// adds the event to the connection's BatchPublisher (made on first use,
// with the default BatchOptions: atomic batches where the server has
// them) and done gets its acknowledgement; with core NATS it publishes
// with PublishDelivered and calls done before it returns. done is called
// once unless an error is returned.
func (c *Conn) PublishEventAsync(ctx context.Context, tag string, body []byte, msgID string, done func(error)) error {
	if c.EventStream(ctx) == "" {
		done(c.PublishDelivered(ctx, tag, body, Meta{MsgID: msgID}))
		return nil
	}
	p, err := c.batchPublisher(ctx)
	if err != nil {
		return err
	}
	return p.Publish(tag, body, Meta{MsgID: msgID}, func(err error) {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
			// The stream went away since it was looked up: ask again
			// before the event's next try.
			c.forgetStream()
		}
		done(err)
	})
}

// batchPublisher returns the connection's BatchPublisher, made on first
// use.
func (c *Conn) batchPublisher(ctx context.Context) (*BatchPublisher, error) {
	c.batchMu.Lock()
	defer c.batchMu.Unlock()
	if c.closing.Load() {
		return nil, errors.New("publishing on a closed connection")
	}
	if c.batcher == nil {
		p, err := c.NewBatchPublisher(ctx, BatchOptions{Logger: c.log})
		if err != nil {
			return nil, err
		}
		c.batcher = p
	}
	return c.batcher, nil
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
