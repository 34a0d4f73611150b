package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/reactord/reactord/natsbus"
)

// consumerSet is a set of the reactor's consumers on the event stream:
// the shared durable consumer, or the consumers of one number of
// partitions.
type consumerSet struct {
	names    []string
	floor    uint64            // the lowest acknowledgement floor (stream sequence)
	last     time.Time         // the latest delivery or creation of any of them
	waiting  int               // pull requests waiting on them (someone consumes)
	filtered bool              // filtered to their subjects (partitions by subject); an earlier version's read the whole stream
	backlog  map[string]uint64 // per consumer: events not delivered or not acknowledged
}

// consumerSets lists the reactor's consumers on the event stream by set:
// the shared durable consumer under its name (Durable), the partition
// consumers under Durable-N.
func consumerSets(c *natsbus.Conn, ctx context.Context, stream, durable string) (map[string]*consumerSet, error) {
	s, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	sets := map[string]*consumerSet{}
	l := s.ListConsumers(ctx)
	for info := range l.Info() {
		name, set := info.Name, ""
		switch {
		case name == durable, name == durable+plainSuffix:
			set = name
		case strings.HasPrefix(name, durable+"-"):
			n, i, ok := strings.Cut(strings.TrimPrefix(name, durable+"-"), "-")
			if _, err := strconv.Atoi(i); !ok || err != nil {
				continue
			}
			if _, err := strconv.Atoi(n); err != nil {
				continue
			}
			set = durable + "-" + n
		default:
			continue
		}
		g := sets[set]
		if g == nil {
			g = &consumerSet{floor: info.AckFloor.Stream, filtered: true, backlog: map[string]uint64{}}
			sets[set] = g
		}
		g.names = append(g.names, name)
		g.filtered = g.filtered && (info.Config.FilterSubject != "" || len(info.Config.FilterSubjects) > 0)
		g.backlog[name] = info.NumPending + uint64(info.NumAckPending)
		g.floor = min(g.floor, info.AckFloor.Stream)
		if info.Delivered.Last != nil && info.Delivered.Last.After(g.last) {
			g.last = *info.Delivered.Last
		}
		if info.Created.After(g.last) {
			g.last = info.Created // a set just created by another replica is not stale
		}
		g.waiting += info.NumWaiting
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	return sets, nil
}

// ensureConsumers puts this number of partitions' consumers and the plain
// lane's in place, removes the reactor's other consumers on the stream,
// and makes the partitions of another number that still hold events units
// to drain.
//
// New consumers start where the reactor left off: after the lowest
// acknowledgement floor of the set of consumers that delivered an event
// last (the shared durable consumer, or another number of partitions), so
// that switching to partitions, or to another number of them, neither runs
// the stream's history again nor skips what was not handled. This
// number's consumers left from an earlier run are stale when another set
// delivered since, and so are consumers that read the whole stream (made
// by a version before partitions by subject): they are created again from
// that set's floor. The plain lane's consumer is kept across numbers of
// partitions (its events are not partitioned); the shared consumer's
// delivering since makes it stale too.
//
// The other sets are then deleted once empty: with interest retention the
// stream keeps an event until every consumer acknowledged it, so a set
// nobody reads would hold every event until MaxAge. Replicas with another
// number of partitions were refused before; the shared consumer is kept
// (and reported) while a daemon still pulls from it.
//
// waitLog receives Ensure's lines while JetStream cannot create them
// yet: the logger at start, nil when a partition's session recovers (no
// WARN per recovery).
func (p *Partitioned) ensureConsumers(ctx context.Context, waitLog *slog.Logger) error {
	var sets map[string]*consumerSet
	err := natsbus.Ensure(ctx, waitLog, "the list of stream "+p.o.Stream+"'s consumers", func(ctx context.Context) error {
		var err error
		sets, err = consumerSets(p.c, ctx, p.o.Stream, p.o.Durable)
		return err
	})
	if err != nil {
		return fmt.Errorf("listing the consumers of stream %s: %w", p.o.Stream, err)
	}
	plan := p.planConsumers(sets)
	if err := p.placeConsumers(ctx, plan, waitLog); err != nil {
		return err
	}
	p.removeOtherSets(ctx, plan)
	return nil
}

// consumerPlan is what ensureConsumers found on the stream and decided
// (see planConsumers).
type consumerPlan struct {
	sets  map[string]*consumerSet // the sets found, the plain lane's left out
	own   string                  // this number's set: Durable-N
	mine  *consumerSet            // this number's consumers left from an earlier run, nil if none
	plain *consumerSet            // the plain lane's consumer left from an earlier run, nil if none
	// start is the stream sequence a missing consumer starts from (0:
	// all).
	start uint64
	// staleMine and stalePlain: this number's consumers, the plain
	// lane's, are deleted and made again from start.
	staleMine, stalePlain bool
}

// planConsumers decides, from the sets of consumers on the stream, where
// a missing consumer starts and which consumers left from an earlier run
// are stale (see ensureConsumers).
func (p *Partitioned) planConsumers(sets map[string]*consumerSet) consumerPlan {
	plainName := p.o.Durable + plainSuffix
	plan := consumerPlan{sets: sets, own: strings.TrimSuffix(p.prefix, "-"), plain: sets[plainName]}
	delete(sets, plainName)
	var latest *consumerSet
	latestName := ""
	for name, g := range sets {
		if name != plan.own && (latest == nil || g.last.After(latest.last)) {
			latest, latestName = g, name
		}
	}
	// Consumers that read every subject (the shared consumer, and an
	// earlier version's partition consumers) handled everything they
	// delivered: when they delivered last, a set kept from before them
	// would run their events again. A filtered set's events are its own
	// subjects' only: another number's partitions being drained do not
	// make this number's stale.
	coversAll := latest != nil && (latestName == p.o.Durable || !latest.filtered)
	mine := sets[plan.own]
	plan.mine = mine
	usedLast := mine != nil && (latest == nil || !latest.last.After(mine.last))
	switch {
	case usedLast:
		// This number's consumers were used last: a missing one starts
		// after their floor.
		plan.start = mine.floor + 1
	case latest != nil:
		plan.start = latest.floor + 1
		p.log.Info("new partition consumers start after the floor of the ones used last", "consumers", latestName, "from_seq", plan.start)
	}
	plan.staleMine = mine != nil && (!mine.filtered || (!usedLast && coversAll))
	plan.stalePlain = plan.plain != nil && coversAll && latest.last.After(plan.plain.last)
	return plan
}

// placeConsumers deletes the stale consumers of plan and creates the
// missing ones.
func (p *Partitioned) placeConsumers(ctx context.Context, plan consumerPlan, waitLog *slog.Logger) error {
	p.mu.Lock()
	units := slices.Clone(p.own)
	p.mu.Unlock()
	staleMine := plan.staleMine
	// The plain lane (the last unit) first: it takes the events the
	// consumers deleted below leave under the event prefix, before they
	// are deleted (an interest stream drops what no consumer wants).
	for _, u := range slices.Backward(units) {
		if u.plain && plan.stalePlain {
			p.log.Warn("deleting the plain lane's consumer left from an earlier run",
				"consumer", p.o.Durable+plainSuffix, "from_seq", plan.start,
				"detail", "the shared consumer delivered events since")
			if err := p.deleteConsumers(ctx, plan.plain.names); err != nil {
				return err
			}
		}
		if !u.plain && staleMine {
			why := "consumers reading every subject delivered events since"
			if !plan.mine.filtered {
				why = "made by an earlier version (each read the whole stream): made again, filtered to their partition"
			}
			p.log.Warn("deleting this number's partition consumers left from an earlier run",
				"consumers", plan.own, "count", len(plan.mine.names), "from_seq", plan.start, "detail", why)
			if err := p.deleteConsumers(ctx, plan.mine.names); err != nil {
				return err
			}
			staleMine = false
		}
		if err := p.createConsumer(ctx, u, plan.start, waitLog); err != nil {
			return err
		}
	}
	return nil
}

// removeOtherSets deals with the sets of plan other than this number's:
// the shared consumer is kept while a daemon pulls from it, another
// number's partitions are drained first (drainLater), and the others are
// deleted.
func (p *Partitioned) removeOtherSets(ctx context.Context, plan consumerPlan) {
	for name, g := range plan.sets {
		switch {
		case name == plan.own:
			continue
		case name == p.o.Durable && g.waiting > 0:
			p.log.Warn("a daemon without partitions still reads the stream", "consumer", name,
				"detail", "per-minion order does not hold between it and the partitions, and the stream keeps events until it acknowledged them",
				"fix", "restart that daemon with the same --partitions as the others")
			continue
		case name != p.o.Durable && g.filtered:
			// Another number's partitions: drained (at once when
			// empty) and deleted once the transform sends nothing
			// more to their subjects, so that no event is dropped.
			p.drainLater(name, g)
			continue
		}
		for _, c := range g.names {
			if err := p.deleteConsumers(ctx, []string{c}); err != nil {
				p.log.Warn("could not delete a consumer no replica uses", "consumer", c, "err", err,
					"detail", "the stream keeps events for it until MaxAge", "fix", "nats consumer rm")
			}
		}
		p.log.Info("deleted the reactor's consumers no replica uses", "consumers", name, "count", len(g.names),
			"detail", "they read every subject: the shared consumer, or an earlier version's partitions")
	}
}

// createConsumer creates u's durable consumer when it is missing, its new
// deliveries from stream sequence start (0: all).
func (p *Partitioned) createConsumer(ctx context.Context, u *unit, start uint64, waitLog *slog.Logger) error {
	cfg := jetstream.ConsumerConfig{Durable: u.name, AckPolicy: jetstream.AckAllPolicy, AckWait: p.o.AckWait, FilterSubject: u.filter,
		MaxAckPending: p.o.MaxAckPending, PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: 2 * p.o.LeaseTTL,
		PriorityGroups: []string{PartitionGroup}, Description: "reactord: " + u.what}
	if start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	err := natsbus.Ensure(ctx, waitLog, "consumer "+u.name, func(ctx context.Context) error {
		_, err := p.c.JetStream().Consumer(ctx, p.o.Stream, u.name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			_, err = p.c.JetStream().CreateConsumer(ctx, p.o.Stream, cfg)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				err = nil // another replica was faster
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("partition consumer %s: %w", u.name, err)
	}
	return nil
}

// deleteConsumers deletes the named consumers of the event stream, each
// once the events it acknowledged are purged from a stream trimmed for
// all its consumers (natsbus.PurgeAcknowledged): a consumer made again
// for its subjects, from an earlier sequence, would deliver them again.
func (p *Partitioned) deleteConsumers(ctx context.Context, names []string) error {
	for _, name := range names {
		if _, err := p.c.PurgeAcknowledged(ctx, p.o.Stream, name); err != nil {
			return fmt.Errorf("before deleting consumer %s: %w", name, err)
		}
		if err := p.c.JetStream().DeleteConsumer(ctx, p.o.Stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("deleting stale partition consumer %s: %w", name, err)
		}
	}
	return nil
}

// drainLater makes the consumers of another number of partitions (set
// is Durable-M) units to drain before this number's partitions start:
// those of the set with the oldest events first, one set at a time.
func (p *Partitioned) drainLater(set string, g *consumerSet) {
	names := slices.Sorted(slices.Values(g.names))
	p.mu.Lock()
	defer p.mu.Unlock()
	var total uint64
	for _, name := range names {
		total += g.backlog[name]
		// Its lease key is the one the replicas of M used: lease.M.j.
		m, j, _ := strings.Cut(strings.TrimPrefix(name, p.o.Durable+"-"), "-")
		lease := "lease." + m + "." + j
		if _, known := p.byLease[lease]; known {
			continue
		}
		p.nextOld++
		p.addUnit(&unit{i: oldBase + p.nextOld, name: name, lease: lease, old: true, set: set, floor: g.floor,
			what: fmt.Sprintf("partition %s of %s (drained before the %d partitions start)", j, m, p.o.Partitions)})
	}
	p.log.Warn("another number of partitions' consumers are on the stream: draining them",
		"detail", "they are drained first, in order, and deleted; this number's partitions start once none is left",
		"consumers", set, "count", len(names), "events", total, "partitions", p.o.Partitions)
}
