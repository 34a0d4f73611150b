package natsbus

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

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

// Moved reports whether the message's partition (consume.NewPartitioned) left
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
