package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/consume"
	"github.com/reactord/reactord/reactor"
)

// subscribe starts taking events: a partitioned or shared JetStream
// consumer, or a core queue group.
func (d *Daemon) subscribe(ctx context.Context) error {
	so := natsbus.StreamOptions{AckWait: d.opts.AckWait, MaxAckPending: MaxAckPending(d.opts.Queue, d.opts.Workers), Duplicates: d.opts.DedupeWindow,
		Replicas: d.opts.StreamReplicas, Logger: d.log}
	if d.opts.Shadow {
		so.TrimEvery = ShadowTrimEvery
	}
	// The stream, the consumers and the buckets are created with
	// retries while JetStream cannot yet (a cluster electing): until
	// then, or until the daemon is told to stop.
	start, cancel := context.WithCancel(d.runCtx)
	defer context.AfterFunc(ctx, cancel)()
	defer cancel()
	var err error
	switch {
	case d.jetstream && d.opts.Partitions > 0:
		var p *consume.Partitioned
		if p, err = d.consumePartitioned(start, so); err == nil {
			d.sub, d.partitioned = p, p
			d.addHealth("partitions", func() error {
				if err := p.Health(); err != nil {
					return fmt.Errorf("partitions: %w", err)
				}
				return nil
			})
		}
	case d.jetstream:
		// An event is acknowledged once dispatched and its archive
		// records are durable, a batch of the store's writer later: leave
		// room for the events in the lanes, the client's pull buffer
		// (1024) and those waiting for a write (about a batch). Progress
		// acknowledgements keep a backlog (and debounced events) from
		// being redelivered to another replica while this one lives.
		so.Progress = true
		var c *consume.Consumer
		if c, err = consume.New(start, d.conn, so, d.handle); err == nil {
			d.sub = c
			d.addHealth("JetStream consumer", func() error {
				if !c.Healthy() {
					return errors.New("JetStream stream or consumer missing (being recreated)")
				}
				return nil
			})
			d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_jetstream_recreated_total", Help: "Times the JetStream stream or consumer was found missing and recreated."},
				func() float64 { return float64(c.Recreated()) }))
			d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_jetstream_trimmed_total",
				Help: "Acknowledged events this replica's purges dropped from the event stream (a stream reactord created on nats-server 2.10 or later is trimmed to the shared consumer's acknowledgement floor; a work queue removes each event itself)."},
				func() float64 { return float64(c.Trimmed()) }))
			d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_jetstream_passed_over_total",
				Help: "Events delivered again that this replica had acknowledged (a consumer recreated over the trimmed stream delivers from its start), acknowledged again without reacting."},
				func() float64 { return float64(c.PassedOver()) }))
		}
	default:
		d.sub, err = d.conn.SubscribeQueue("", "reactord", d.handle)
	}
	if err != nil {
		return configErr(err)
	}
	d.push("consumer", func(context.Context) error { d.sub.Stop(); return nil })
	if err := d.conn.Flush(ctx); err != nil {
		return configErr(err)
	}
	return nil
}

// handle hands one message to the pipeline with the one function that
// settles it.
func (d *Daemon) handle(m *natsbus.Message) {
	dl := reactor.Delivery{Body: m.Body, Received: m.Received, Sent: m.Meta.Sent, Hop: m.Meta.Hop, Seq: m.Seq, MsgID: m.Meta.MsgID}
	if d.jetstream {
		dl.Redelivers = true
		dl.Settle = func(o reactor.Outcome) {
			switch o {
			case reactor.Ack:
				_ = m.Ack()
			case reactor.Retry:
				_ = m.Nak()
			}
		}
		if d.opts.Partitions > 0 {
			dl.Owned = func() bool { return !m.Moved() }
		}
	}
	d.pipe.Submit(d.runCtx, dl) // settles what it refuses
}

// consumePartitioned consumes the stream in partitions by minion (the key
// of the daemon's lanes) and registers the ownership metrics.
func (d *Daemon) consumePartitioned(ctx context.Context, so natsbus.StreamOptions) (*consume.Partitioned, error) {
	changes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reactord_partition_changes_total",
		Help: "Changes of partition ownership in this replica: acquired, released (handed over), lost (lease not renewed), resync (reset to the acknowledgement floor), drained (a partition of a former number emptied and deleted)."}, []string{"change"})
	for _, c := range []string{"acquired", "released", "lost", "resync", "drained"} {
		changes.WithLabelValues(c)
	}
	d.reg.MustRegister(changes)
	p, err := consume.NewPartitioned(ctx, d.conn, consume.PartitionOptions{StreamOptions: so, Partitions: d.opts.Partitions,
		OnChange: func(change string, _ int) { changes.WithLabelValues(change).Inc() }}, d.handle)
	if err != nil {
		return nil, err
	}
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_partitions_owned", Help: "Partitions of the event stream this replica holds (--partitions)."},
		func() float64 { return float64(len(p.Owned())) }))
	d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_jetstream_trimmed_total",
		Help: "Acknowledged events this replica's purges dropped from the event stream (a partitions' stream reactord created is trimmed to what all its consumers acknowledged)."},
		func() float64 { return float64(p.Trimmed()) }))
	return p, nil
}
