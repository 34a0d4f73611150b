package natsbus

import (
	"context"
	"errors"
)

// ErrReconnected reports a core NATS publish that a flush cannot confirm:
// the connection was re-established between the publish and the flush's
// answer. A publish the client had written to the old connection, or still
// held for it, may never have reached a server, while the flush's round
// trip succeeds on the new connection; so the publish counts as failed,
// and a retry may deliver it twice.
var ErrReconnected = errors.New("the NATS connection was re-established before the publish was confirmed: it may not have reached the server")

// Mark is where core publishes stand against the connection's
// reconnections, for FlushSince to confirm them. The zero Mark holds no
// publish.
type Mark struct {
	// sent and buffered are 1 + the client's count of connections made
	// again (nats.Statistics.Reconnects) at the earliest publish written
	// to a live connection, and at the earliest made while the client
	// reconnected (kept in its reconnect buffer, which goes out first on
	// the next connection); 0: none of that kind.
	sent, buffered uint64
}

// Merge returns the Mark of the publishes of m and o together.
func (m Mark) Merge(o Mark) Mark {
	earliest := func(a, b uint64) uint64 {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	return Mark{sent: earliest(m.sent, o.sent), buffered: earliest(m.buffered, o.buffered)}
}

// reconnects is how many times the client connected again (counting
// attempts whose handshake then failed).
func (c *Conn) reconnects() uint64 { return c.nc.Stats().Reconnects }

// Mark returns a Mark for a series of publishes from now on, which
// FlushSince confirms together as though each went to the live connection:
// any reconnection during the series leaves it unconfirmed, the safe side.
func (c *Conn) Mark() Mark { return Mark{sent: c.reconnects() + 1} }

// Marked runs publish, which makes core publishes on c (Publish with
// Core), and returns their Mark for FlushSince: one flush then confirms
// many publishes (Mark.Merge). A publish counts as kept in
// the reconnect buffer only when the client was reconnecting before it
// and no connection was made meanwhile (each connection is counted, under
// the lock that publishing takes, before the client is connected): one
// that races the loss of a connection may have been written to it, and
// one that races a reconnection's end may have gone to the new one; both
// count as written to a live connection, which FlushSince confirms only if
// no connection followed.
func (c *Conn) Marked(publish func() error) (Mark, error) {
	n := c.reconnects()
	up := c.nc.IsConnected()
	if err := publish(); err != nil {
		return Mark{}, err
	}
	if c.afterPublish != nil {
		c.afterPublish()
	}
	if !up && c.reconnects() == n {
		return Mark{buffered: n + 1}, nil
	}
	return Mark{sent: n + 1}, nil
}

// FlushSince makes one round trip to the server and confirms the
// publishes of m. It returns ErrReconnected when one of them may have been
// lost with a connection: one written to a connection that was replaced
// since (a flush alone would succeed on the new connection although the
// publish died with the old one), or one from the reconnect buffer when
// more than one connection was made since (the buffer went out on the
// first, which may have died with it). While the client reconnects, the
// round trip waits for the new connection, or for ctx (10 s when ctx has
// no deadline).
//
// Connections whose handshake then failed count too (a proxy or load
// balancer that accepts and hangs up, a TLS or authorization failure):
// after such an outage, publishes from the reconnect buffer are reported
// unconfirmed although they went out. A server that is down refuses the
// connection, and is not counted.
func (c *Conn) FlushSince(ctx context.Context, m Mark) error {
	if err := c.Flush(ctx); err != nil {
		return err
	}
	now := c.reconnects()
	if (m.sent != 0 && now != m.sent-1) || (m.buffered != 0 && now != m.buffered) {
		return ErrReconnected
	}
	return nil
}
