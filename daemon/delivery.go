package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/reactord/reactord/internal/redact"
	"github.com/reactord/reactord/natsbus"
)

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
		has, why := d.conn.JetStreamEnabled(ctx)
		d.jetstream = has
		if !has {
			d.log.Warn("NATS server has no JetStream: using core NATS, which may drop events",
				"nats", redact.URLs(d.natsURL), "why", why, "metric", "reactord_dropped_total",
				"detail", "events that overflow the lanes, or arrive while no replica runs, are dropped",
				"fix", "enable JetStream on the server, or give --jetstream=false to choose core NATS")
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

// gateFeatures refuses, with one line naming the feature, the server's
// version and the version it needs (natsbus.FeatureError), a feature
// the NATS server is too old for: the daemon would otherwise say ready
// and then take nothing (a partition consumer whose reset is never
// answered). JetStream delivery chosen by default falls back to core NATS
// and the shared state to this process's memory, each with a warning
// naming the versions. --jetstream given on a server that says it has no
// JetStream is refused too (creating the stream would otherwise wait for
// ever, as for a cluster that has not elected yet).
func (d *Daemon) gateFeatures(ctx context.Context) error {
	o := &d.opts
	if d.jetstream && o.JetStream.Given {
		if err := d.conn.JetStreamAbsent(ctx); err != nil {
			return fmt.Errorf("--jetstream: %s: %w; enable JetStream on the server (or for the account), or give --jetstream=false for core NATS", redact.URLs(d.natsURL), err)
		}
	}
	sv, err := d.conn.ServerVersion(ctx)
	if err != nil {
		d.log.Warn("cannot tell the NATS server's version: features not checked", "err", err)
		return nil
	}
	if d.jetstream {
		if err := natsbus.FeatureJetStream.Check(sv); err != nil {
			if o.JetStream.Given {
				return err
			}
			d.log.Warn("JetStream delivery refused: falling back to core NATS", "nats", sv.URL, "err", err.Error(),
				"detail", "events that overflow the lanes, or arrive while no replica runs, are dropped")
			d.jetstream = false
			if err := needJetStream(o); err != nil {
				return err
			}
		}
		if o.Partitions > 0 {
			if err := natsbus.FeaturePartitions.Check(sv); err != nil {
				return err
			}
		}
		if o.DedupeMasters > 0 {
			if err := natsbus.FeatureDedupeMasters.Check(sv); err != nil {
				return err
			}
		}
		if o.Partitions == 0 {
			if err := natsbus.FeatureTrimmedStream.Check(sv); err != nil {
				d.log.Warn("JetStream: a new event stream is a work queue, about half as fast", "nats", sv.URL, "err", err.Error(),
					"detail", "a work queue removes and flushes each acknowledged event on its own (about half the events/s in a burst)")
			}
		}
	}
	if o.SharedState {
		if err := natsbus.FeatureSharedState.Check(sv); err != nil {
			d.sharedRefused = err
		}
	}
	return nil
}
