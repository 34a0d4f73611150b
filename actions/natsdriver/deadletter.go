package natsdriver

import (
	"context"
	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/natsbus"
)

// DeadLetter publishes a reaction that failed for good on subject, as the
// JSON {"tag", "chunk", "error"}, for inspection and replay. It lives here
// rather than in natsbus so that natsbus does not depend on actions.
func DeadLetter(c *natsbus.Conn, subject string, a actions.Action, cause error) {
	body := []byte(`{"tag":`)
	body, _ = event.AppendJSON(body, a.Tag)
	body = append(body, `,"chunk":`...)
	body, _ = event.AppendJSON(body, a.Chunk)
	body = append(body, `,"error":`...)
	body, _ = event.AppendJSON(body, cause.Error())
	body = append(body, '}')
	_ = c.Publish(context.Background(), natsbus.Msg{Subject: subject, Body: body, Meta: natsbus.Meta{Cause: a.Tag}}, natsbus.Core)
}
