package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/redact"
	"github.com/reactord/reactord/natsbus"
)

// jetStreamAskTimeout bounds the question whether the server has
// JetStream.
const jetStreamAskTimeout = 5 * time.Second

// chooseDelivery settles --jetstream auto once connected: JetStream
// whenever the server has it, the embedded one or another, so that a
// burst waits in the stream instead of overflowing the lanes; core NATS
// only on a server without it, said once in the log, as its events can be
// dropped.
func (d *Daemon) chooseDelivery(ctx context.Context) error {
	o := &d.opts
	if o.JetStream.Given {
		d.jetstream = o.JetStream.Value
	} else {
		has, why := serverJetStream(ctx, d.conn)
		d.jetstream = has
		if !has {
			d.log.Warn("the NATS server has no JetStream: events come through a core NATS queue group, and those that overflow the lanes, or arrive while no replica runs, are dropped (reactord_dropped_total); enable JetStream on the server, or give --jetstream=false to choose core NATS",
				"nats", redact.URLs(d.natsURL), "why", why)
		}
	}
	if !d.jetstream {
		return needJetStream(o)
	}
	return nil
}

// needJetStream refuses the settings that need JetStream, with core NATS
// delivery.
func needJetStream(o *Options) error {
	if o.Partitions > 0 {
		return errors.New("--partitions needs --jetstream, and a NATS server with JetStream (core NATS queue groups cannot keep a minion's events in order across replicas)")
	}
	if o.DedupeMasters > 0 {
		return errors.New("--dedupe-masters needs --jetstream, and a NATS server with JetStream (the copies are told apart through a JetStream key-value bucket)")
	}
	return nil
}

// serverJetStream asks the server whether this connection's account has
// JetStream (its account information), else, when the question gets no
// answer, what the server's INFO says. why says how it knows.
func serverJetStream(ctx context.Context, conn *natsbus.Conn) (has bool, why string) {
	actx, cancel := context.WithTimeout(ctx, jetStreamAskTimeout)
	defer cancel()
	_, err := conn.JetStream().AccountInfo(actx)
	switch {
	case err == nil:
		return true, "the account has JetStream"
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return false, "JetStream is not enabled on the server"
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return false, "JetStream is not enabled for this account"
	}
	if on, _ := conn.NATS().ConnectedServerJetStream(); on {
		return true, "the server's INFO says JetStream (its account information did not answer: " + err.Error() + ")"
	}
	return false, "the server's INFO says no JetStream, and its account information did not answer: " + err.Error()
}
