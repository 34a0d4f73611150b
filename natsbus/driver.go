package natsbus

import (
	"context"
	"fmt"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// DefaultExecPrefix is where the nats driver publishes reactions.
const DefaultExecPrefix = "reactord.exec."

// Driver is the `nats` driver: it publishes each reaction, as the JSON
// line {"tag": TAG, "chunk": {...}}, on <prefix><state> (e.g.
// reactord.exec.local) for custom executors, and waits for the server to
// have it (a flush).
type Driver struct {
	conn   *Conn
	prefix string
	origin string
}

// NewDriver returns a nats driver publishing under prefix (default
// reactord.exec.).
func NewDriver(c *Conn, prefix, origin string) *Driver {
	if prefix == "" {
		prefix = DefaultExecPrefix
	}
	return &Driver{conn: c, prefix: prefix, origin: origin}
}

// Name implements actions.Driver.
func (d *Driver) Name() string { return "nats" }

// Supports implements actions.Driver: executors decide what they run.
func (d *Driver) Supports(string) bool { return true }

// Do implements actions.Driver.
func (d *Driver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	body := actions.AppendLine(nil, a.Tag, a.Chunk)
	subj := d.prefix + Subject("", a.Chunk.Str("state"))
	if err := d.conn.PublishRaw(subj, body[:len(body)-1], Meta{Origin: d.origin, Cause: a.Tag, Hop: a.Hop + 1}); err != nil {
		return actions.Result{}, actions.Retryable(fmt.Errorf("publishing to %s: %w", subj, err))
	}
	if err := d.conn.Flush(ctx); err != nil {
		return actions.Result{}, actions.Retryable(fmt.Errorf("flushing %s: %w", subj, err))
	}
	return actions.Result{}, nil
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

var _ actions.Driver = (*Driver)(nil)
