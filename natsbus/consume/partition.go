package consume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reactord/reactord/internal/tasks"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/kv"
)

// Per-key order across replicas.
//
// The publishers put a hash of each event's ordering key (its minion, else
// its tag) into its subject (natsbus.KeyedSubject), and the stream stores
// the event under its partition's subject (natsbus.PartitionTransform:
// the server's own partition() mapping of the hash). The stream is read
// through Partitions durable consumers, each filtered to its partition's
// subject, so that each receives only its own events, plus one consumer
// for the events published without a key (core NATS publishers, older
// bridges, other tools), whose subjects stay under the event prefix: the
// plain lane, kept whatever the number of partitions. Each of these
// consumers is owned by one replica at a time, through a lease in a key-value bucket
// (a key with a time to live, renewed and taken over by compare-and-set);
// the consumer's pinned-client priority group keeps a second puller out
// even if two replicas believed they held the lease. The owner hands the
// partition's events to the handler in stream order, and acknowledges
// (AckAll) the longest handled prefix. A new owner resets the consumer to
// its acknowledgement floor before pulling, so the events its predecessor
// left unacknowledged come again, in order, before any later one; the
// only events handled twice are those in flight at a death or a hand-over.
//
// Changing the number of partitions (every replica stopped, then started
// with the new number) drains the old number's partitions first: their
// consumers are leased, consumed and balanced as the others, and deleted
// once empty; the new partitions start when none is left, so that the
// events of one minion are still handled in stream order.

// requestTimeout bounds one JetStream API request of a partition's
// session start.
const requestTimeout = 2 * time.Second

// PartitionGroup is the priority group the partition consumers are pulled
// with.
const PartitionGroup = "reactord"

// PartitionOptions configure NewPartitioned.
type PartitionOptions struct {
	natsbus.StreamOptions
	// Partitions is the number of partitions (1 to 1024). Every replica
	// must use the same number: NewPartitioned refuses to start
	// while a replica with another number is alive.
	Partitions int
	// Replica names this process among the replicas (default
	// host-pid-time); it must be unique.
	Replica string
	// LeaseTTL is how long a partition stays with a replica that stopped
	// renewing its lease (a replica that died): default 4s, whole
	// seconds, at least 2s. The owner renews every quarter of it and
	// stops consuming a partition whose lease it could not renew for two
	// thirds of it.
	LeaseTTL time.Duration
	// Bucket is the key-value bucket of the leases and the replicas'
	// presence (default REACTORD_PARTITIONS).
	Bucket string
	// OnChange, when set, is called on every change of ownership:
	// "acquired", "released" (handed over), "lost" (the lease could not
	// be renewed or another replica holds it), "resync" (a delivery
	// was missed or an event refused: the partition was reset to its
	// acknowledgement floor) and "drained" (a former number's partition
	// emptied and deleted), with the unit: a partition 0 to N-1, the
	// plain lane N, a former number's partition from 10000.
	OnChange func(change string, partition int)

	// afterReset, when a test sets it, runs in each session's start
	// between the consumer's reset and the first pull: where a former
	// owner's late pull request lands in the race TestHandOverDeadPull
	// forces.
	afterReset func(consumer string)
	// resetTo, when a test sets it and it returns a sequence, is where a
	// session's reset starts the consumer instead of its acknowledgement
	// floor.
	resetTo func(consumer string) uint64
}

func (o *PartitionOptions) defaults() {
	o.StreamOptions.Defaults()
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 4 * time.Second
	}
	o.LeaseTTL = max(o.LeaseTTL.Round(time.Second), 2*time.Second)
	if o.Bucket == "" {
		o.Bucket = "REACTORD_PARTITIONS"
	}
	if o.Replica == "" {
		host, _ := os.Hostname()
		o.Replica = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	}
	o.Replica = keySafe(o.Replica)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// keySafe keeps the bytes a key-value key may hold and replaces the others
// with '_'.
func keySafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '=') {
			b[i] = '_'
		}
	}
	return string(b)
}

// unit is one consumer a replica may hold: a partition of this number,
// the plain lane, or a partition of another number being drained.
type unit struct {
	i      int    // its index: partitions 0 to N-1, the plain lane N, drained ones above
	name   string // its durable consumer
	lease  string // its lease key in the bucket
	filter string // its subject filter
	what   string // for logs and descriptions
	old    bool   // another number's partition: drained, then deleted
	plain  bool   // the plain lane: taken by whoever finds it free, beside the balanced partitions
	set    string // an old unit's set (Durable-M)
	floor  uint64 // an old unit's set's acknowledgement floor when found: the oldest set drains first
}

// oldBase numbers the units of another number of partitions being drained.
const oldBase = 10000

// Partitioned consumes the event stream by partitions (see
// NewPartitioned). Stop ends the pulling; Release, once the handler's
// events are settled, hands the partitions over.
type Partitioned struct {
	c       *natsbus.Conn
	o       PartitionOptions
	handler func(*natsbus.Message)
	log     *slog.Logger
	state   *kv.State
	prefix  string // consumer names: <Durable>-<N>-

	mu       sync.Mutex
	own      []*unit       // this number's partitions and the plain lane
	old      map[int]*unit // another number's partitions left to drain
	nextOld  int           // numbers the old units
	byLease  map[string]int
	owned    map[int]*partRun
	leases   map[int]string // from the bucket's watch: unit → owner
	members  map[string]int // live replicas → their number of partitions
	stopping bool
	release  *partRun // a hand-over under way
	warned   map[string]bool
	// readAt is when the leases were last read from the bucket; unowned
	// holds, for each partition without an owner at the last reading,
	// since when it has had none (see Health).
	readAt  time.Time
	unowned map[int]time.Time

	kick     chan struct{}
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	relOnce  sync.Once
	cancel   context.CancelFunc
	// watched is closed once the bucket's watch has ended (after cancel):
	// apply is not called any more.
	watched <-chan struct{}
	// tasks counts the goroutines started here (manage, each partition's
	// start and acknowledgements, hand-overs, resyncs, settles) and the
	// client's callbacks under way: Release waits for them all.
	tasks tasks.Set

	resyncs, ignored, received atomic.Int64

	// Trimming the stream (parttrim.go).
	trimmer  atomic.Pointer[natsbus.Trimmer]
	relook   atomic.Bool   // the Trimmer's look-up failed: try again
	ackedNew atomic.Bool   // acknowledged since the last trim
	ackedTop atomic.Uint64 // the highest stream sequence acknowledged
	trimmed  atomic.Int64
	trimKick chan struct{} // an acknowledgement: trimLoop trims
	trimDone chan struct{} // closed when trimLoop has returned
}

// ErrPartitionsDiffer reports a replica started with another number of
// partitions than the running ones.
var ErrPartitionsDiffer = errors.New("replicas disagree on the number of partitions")

// NewPartitioned consumes the event stream so that the events of one key
// (an event's minion, else its tag, hashed into its subject by the
// publisher) are handed to handler one at a time, in stream order,
// whichever replica handles them: the stream is read through o.Partitions
// consumers and the plain lane's, each owned by one replica at a time and
// taken over, from its acknowledgement floor, when its owner dies or
// hands it over (the replicas balance the partitions among themselves).
// handler must Ack or Nak every message; a Nak makes the partition start
// again from its acknowledgement floor. Ownership changes are logged.
func NewPartitioned(ctx context.Context, c *natsbus.Conn, o PartitionOptions, handler func(*natsbus.Message)) (*Partitioned, error) {
	o.defaults()
	if o.Partitions < 1 || o.Partitions > 1024 {
		return nil, fmt.Errorf("partitions %d: want 1 to 1024", o.Partitions)
	}
	so := o.StreamOptions
	so.Partitions = o.Partitions // interest retention, and the subject transform to this number
	if err := natsbus.Ensure(ctx, o.Logger, "stream "+so.Stream, func(ctx context.Context) error { return c.EnsureStream(ctx, so) }); err != nil {
		return nil, err
	}
	st, err := kv.Open(ctx, c, kv.StateOptions{Bucket: o.Bucket, Replicas: o.Replicas, Logger: o.Logger, WaitLog: o.Logger,
		Description: "reactord --partitions: which replica owns each partition of the event stream, and the live replicas"})
	if err != nil {
		return nil, fmt.Errorf("partitions: %w", err)
	}
	run, cancel := context.WithCancel(context.Background())
	p := &Partitioned{c: c, o: o, handler: handler, log: o.Logger, state: st, prefix: o.Durable + "-" + strconv.Itoa(o.Partitions) + "-",
		old: map[int]*unit{}, byLease: map[string]int{},
		owned: map[int]*partRun{}, leases: map[int]string{}, members: map[string]int{}, warned: map[string]bool{},
		readAt: time.Now(), unowned: map[int]time.Time{},
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), trimKick: make(chan struct{}, 1), trimDone: make(chan struct{}), cancel: cancel}
	p.lookUpTrimmer(ctx)
	for i := range o.Partitions {
		p.addUnit(&unit{i: i, name: p.prefix + strconv.Itoa(i), lease: "lease." + strconv.Itoa(o.Partitions) + "." + strconv.Itoa(i),
			filter: natsbus.PartitionFilter(c.Prefix(), o.Partitions, i), what: fmt.Sprintf("partition %d of %d of the events", i, o.Partitions)})
	}
	p.addUnit(&unit{i: o.Partitions, name: o.Durable + plainSuffix, lease: "lease.plain", filter: c.Prefix() + ">", plain: true,
		what: "the events published without a partition key"})
	watched, err := st.WatchDone(ctx, run, p.apply)
	if err != nil {
		cancel()
		if watched != nil {
			<-watched
		}
		return nil, fmt.Errorf("partitions: %w", err)
	}
	p.watched = watched
	if err := p.begin(ctx, so); err != nil {
		cancel()
		<-watched
		return nil, err
	}
	p.heartbeat()
	p.log.Info("partitioned consumption started",
		"detail", "events of one minion are handled in order by one replica at a time",
		"partitions", o.Partitions, "replica", o.Replica, "lease_ttl", o.LeaseTTL.String(), "bucket", o.Bucket)
	p.tasks.Go(p.manage)
	p.tasks.Go(p.trimLoop)
	return p, nil
}

// begin checks that the live replicas run with this number of
// partitions, puts the consumers in place and then the stream's subject
// transform to this number.
func (p *Partitioned) begin(ctx context.Context, so natsbus.StreamOptions) error {
	o := p.o
	p.mu.Lock()
	for id, n := range p.members {
		if n != o.Partitions && id != o.Replica {
			p.mu.Unlock()
			return fmt.Errorf("partitions: replica %s runs with %d partitions, this one with %d: %w (stop every replica to change the number)",
				id, n, o.Partitions, ErrPartitionsDiffer)
		}
	}
	p.mu.Unlock()
	if err := p.ensureConsumers(ctx, p.log); err != nil {
		return err
	}
	// The consumers exist: the stream may store keyed events under this
	// number's subjects now.
	so.Logger = o.Logger
	if err := natsbus.Ensure(ctx, o.Logger, "the subject transform of stream "+so.Stream, func(ctx context.Context) error { return p.c.SetPartitionTransform(ctx, so) }); err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	return nil
}

// plainSuffix names the plain lane's consumer after the durable name.
const plainSuffix = "-plain"

// addUnit makes u one of the units (p.mu held, or before manage runs).
func (p *Partitioned) addUnit(u *unit) {
	if u.old {
		p.old[u.i] = u
	} else {
		p.own = append(p.own, u)
	}
	p.byLease[u.lease] = u.i
}

// unitLocked returns unit i, nil once it is gone (a drained one); p.mu held.
func (p *Partitioned) unitLocked(i int) *unit {
	if i >= oldBase {
		return p.old[i]
	}
	if i < len(p.own) {
		return p.own[i]
	}
	return nil
}

// active lists the units replicas hold now: while another number's
// partitions are left to drain, those of the set with the oldest events
// (the lowest acknowledgement floor), else this number's (p.mu held).
func (p *Partitioned) active() []*unit {
	if len(p.old) == 0 {
		return p.own
	}
	var first *unit
	for _, u := range p.old {
		if first == nil || u.floor < first.floor || u.floor == first.floor && u.set < first.set {
			first = u
		}
	}
	out := make([]*unit, 0, len(p.old))
	for _, u := range p.old {
		if u.set == first.set {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unit) int { return cmp.Compare(a.i, b.i) })
	return out
}

func (p *Partitioned) changed(change string, i int) {
	if p.o.OnChange != nil {
		p.o.OnChange(change, i)
	}
}

// Owned returns the partitions this replica holds, in order: this
// number's (0 to N-1) and, while they are drained, another number's (from
// 10000); not the plain lane (see HoldsPlain).
func (p *Partitioned) Owned() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for i, r := range p.owned {
		if !r.u.plain {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// HoldsPlain reports whether this replica holds the plain lane (the events
// published without a partition key).
func (p *Partitioned) HoldsPlain() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.owned {
		if r.u.plain {
			return true
		}
	}
	return false
}

// Resyncs returns how many times a partition was reset to its
// acknowledgement floor while held (a missed delivery, a refused event).
func (p *Partitioned) Resyncs() int64 { return p.resyncs.Load() }

// Received returns how many deliveries this replica's consumers received,
// redeliveries included: with partitions by subject, about the events of
// the partitions it held, not every event of the stream.
func (p *Partitioned) Received() int64 { return p.received.Load() }

// Ignored returns how many redeliveries of events already taken were
// passed over.
func (p *Partitioned) Ignored() int64 { return p.ignored.Load() }

// Stop stops pulling events; the partitions stay this replica's (their
// leases renewed) until Release, so that the events handed to the
// handler finish here. It is safe to call twice.
func (p *Partitioned) Stop() {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.stopping = true
		runs := make([]*partRun, 0, len(p.owned))
		for _, r := range p.owned {
			runs = append(runs, r)
		}
		p.mu.Unlock()
		for _, r := range runs {
			r.halt()
		}
	})
}

// Release (after Stop, once the handler's events are settled or ctx
// ends) acknowledges what was handled, frees the leases so that the other
// replicas take the partitions over at once, and withdraws this replica.
// It is safe to call twice.
func (p *Partitioned) Release(ctx context.Context) {
	p.Stop()
	p.relOnce.Do(func() {
		close(p.quit)
		<-p.done
		p.mu.Lock()
		runs := make([]*partRun, 0, len(p.owned))
		for _, r := range p.owned {
			runs = append(runs, r)
		}
		p.owned = map[int]*partRun{}
		p.mu.Unlock()
		wait := p.o.AckWait
		if dl, ok := ctx.Deadline(); ok {
			wait = max(time.Until(dl), 0) // a negative wait would have no bound
		}
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Go(func() {
				r.settle(wait)
				p.writeFree(r.u)
				p.changed("released", r.i)
			})
		}
		wg.Wait()
		p.state.Delete("member."+p.o.Replica, time.Second)
		_ = p.c.Flush(ctx)
		p.trimLast(ctx)
		p.cancel()
		<-p.watched
		_ = p.tasks.Close(context.Background()) // no deadline: waits for every one
		if len(runs) > 0 {
			p.log.Info("partitions handed over at stop", "partitions", len(runs), "replica", p.o.Replica)
		}
	})
}
