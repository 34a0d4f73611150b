package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/kv"
)

// ruleChanges are the changes salt-run reactor.add, reactor.delete and
// reactor.set_leader made at run time, laid over the configuration's
// rules (config.Overlaid) by every replica and after a restart.
type ruleChanges struct {
	// Added are the rules added, in order.
	Added []config.Added `json:"added,omitempty"`
	// Deleted are the configuration's rules deleted: each removes the
	// first rule of the configuration left with its glob.
	Deleted []deletedRule `json:"deleted,omitempty"`
	// Paused maps the id of each master whose reactions are paused to
	// when they were.
	Paused map[string]time.Time `json:"paused,omitempty"`
}

// deletedRule is a configuration rule salt-run reactor.delete removed.
type deletedRule struct {
	Glob   string    `json:"glob"`
	At     time.Time `json:"at"`
	Master string    `json:"master,omitempty"`
}

// globs are the deleted rules' globs.
func (c *ruleChanges) globs() []string {
	out := make([]string, len(c.Deleted))
	for i, d := range c.Deleted {
		out[i] = d.Glob
	}
	return out
}

// parseChanges reads the stored changes (none for empty).
func parseChanges(b []byte) (*ruleChanges, error) {
	c := &ruleChanges{}
	if len(b) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("reading the rule changes: %w", err)
	}
	return c, nil
}

// docStore keeps the rule changes as one document.
type docStore interface {
	Get(ctx context.Context) ([]byte, error)
	// Update returns the revision it wrote (0 where the store has none).
	Update(ctx context.Context, change func([]byte) ([]byte, error)) (uint64, error)
	// Watch calls apply with each later document and its revision.
	Watch(ctx context.Context, apply func([]byte, uint64)) error
	Where() string
}

// fileDoc is a docStore in a file of the data directory, for a daemon
// whose NATS server has no JetStream: it survives a restart but is this
// replica's alone.
type fileDoc struct {
	path string
	mu   sync.Mutex
}

func (f *fileDoc) Where() string { return "file " + f.path }

func (f *fileDoc) Get(context.Context) ([]byte, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func (f *fileDoc) Update(ctx context.Context, change func([]byte) ([]byte, error)) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, err := f.Get(ctx)
	if err != nil {
		return 0, err
	}
	next, err := change(cur)
	if err != nil {
		return 0, err
	}
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, next, 0o600); err != nil {
		return 0, fmt.Errorf("writing the rule changes: %w", err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		return 0, fmt.Errorf("writing the rule changes: %w", err)
	}
	return 0, nil
}

func (f *fileDoc) Watch(context.Context, func([]byte, uint64)) error { return nil }

// ruleChangesFile is the file of the rule changes without JetStream.
const ruleChangesFile = "rule-changes.json"

// ruleChangesReadTimeout bounds the wait for the rule changes' first read
// at a start.
const ruleChangesReadTimeout = time.Minute

// openRuleChanges opens the store of the rule changes (the shared bucket,
// else a file of the data directory), lays them over the configuration
// before the pipeline starts, and follows the other replicas' changes.
func (d *Daemon) openRuleChanges(ctx context.Context) error {
	var store docStore
	if d.conn != nil {
		doc, err := d.openRuleDoc(ctx)
		switch {
		case err == nil:
			store = doc
		case errors.Is(err, kv.ErrStateUnsupported) && !d.jetstream:
		default:
			d.log.Warn("rule changes unavailable: salt-run reactor.add/delete refused", "err", err,
				"detail", "the rules salt-run reactor.add and reactor.delete changed are not applied in this replica; salt-run reactor.add, delete and set_leader are answered that the changes are unavailable",
				"fix", "check the NATS cluster's JetStream, then restart reactord")
			// The engine still answers salt-run: list, and a refusal
			// of the changes, rather than no answer at all.
			d.helloEngine(ctx)
			return nil
		}
	}
	if store == nil {
		store = &fileDoc{path: filepath.Join(d.dataDir, ruleChangesFile)}
	}
	// A bucket just created on a cluster may have no leader yet: wait for
	// it as for the stream (Ensure retries what is transient).
	var raw []byte
	gctx, cancel := context.WithTimeout(ctx, ruleChangesReadTimeout)
	err := natsbus.Ensure(gctx, d.log, store.Where(), func(ctx context.Context) error {
		var err error
		raw, err = store.Get(ctx)
		return err
	})
	cancel()
	if err != nil {
		return err
	}
	ch, err := parseChanges(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", store.Where(), err)
	}
	d.ruleDoc = store
	d.changes.Store(ch)
	d.changesRaw = raw
	if len(ch.Added)+len(ch.Deleted) > 0 {
		cfg := d.cfg.Overlaid(ch.Added, ch.globs())
		eng, err := d.loadEngine(cfg)
		if err != nil {
			return fmt.Errorf("the rules salt-run reactor.add changed (%s): %w", store.Where(), err)
		}
		d.cfg, d.eng = cfg, eng
		d.log.Info("salt-run reactor changes applied", "added", len(ch.Added), "deleted", len(ch.Deleted), "store", store.Where())
	}
	d.helloEngine(ctx)
	d.notePause(&ruleChanges{}, ch)
	return store.Watch(d.runCtx, d.changedElsewhere)
}

// openRuleDoc opens the rule changes' bucket. A replica consuming
// JetStream knows the cluster has it: a server that answers no JetStream
// request yet (a cluster still forming, "no responders") is asked again
// until sharedOpenTimeout, not taken for one without JetStream, which
// would keep this replica's changes in a file of its own.
func (d *Daemon) openRuleDoc(ctx context.Context) (*kv.Doc, error) {
	octx, cancel := context.WithTimeout(ctx, sharedOpenTimeout)
	defer cancel()
	for {
		doc, err := kv.OpenDoc(octx, d.conn, "", d.opts.StreamReplicas, d.log)
		if err == nil || !d.jetstream || !errors.Is(err, kv.ErrStateUnsupported) {
			return doc, err
		}
		select {
		case <-octx.Done():
			return nil, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// helloEngine finds the master driver's Salt engine, which answers
// salt-run reactor.*, and asks it which master it serves: the master
// whose set_leader pauses this replica, asked before the first event.
func (d *Daemon) helloEngine(ctx context.Context) {
	if d.mengine = masterEngine(d.drv); d.mengine != nil && !d.opts.Shadow {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = d.mengine.Hello(hctx)
		cancel()
	}
}

// changedElsewhere applies the changes another replica wrote (revision
// rev of the bucket).
func (d *Daemon) changedElsewhere(raw []byte, rev uint64) {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if rev <= d.changesRev || string(raw) == string(d.changesRaw) {
		// This replica's own write, or one older than it: the watch
		// delivers revisions after this replica applied later ones.
		return
	}
	d.changesRev = rev
	ch, err := parseChanges(raw)
	if err != nil {
		d.log.Error("salt-run reactor changes unreadable", "err", err)
		return
	}
	old := d.changes.Load()
	d.changesRaw = raw
	d.changes.Store(ch)
	d.notePause(old, ch)
	if slices.Equal(old.globs(), ch.globs()) && slices.EqualFunc(old.Added, ch.Added, sameAdded) {
		return
	}
	eng, _, err := d.overlaidEngine(ch)
	if err == nil {
		err = d.swapEngine(eng)
	}
	if err != nil {
		d.log.Error("salt-run reactor changes not applied", "err", err, "detail", "the running rules go on")
		return
	}
	d.log.Info("salt-run reactor changes applied", "added", len(ch.Added), "deleted", len(ch.Deleted), "store", d.ruleDoc.Where())
}

func sameAdded(a, b config.Added) bool {
	return a.Glob == b.Glob && slices.Equal(a.Files, b.Files) && a.At.Equal(b.At)
}

// overlaidEngine builds the engine of the configuration on disk with ch
// laid over it.
func (d *Daemon) overlaidEngine(ch *ruleChanges) (*engine.Engine, *config.Config, error) {
	base, err := config.Load(d.opts.Config)
	if err != nil {
		return nil, nil, err
	}
	cfg := base.Overlaid(ch.Added, ch.globs())
	eng, err := d.loadEngine(cfg)
	return eng, cfg, err
}

// swapEngine hands eng to the running pipeline (before it started: the
// one it starts with).
func (d *Daemon) swapEngine(eng *engine.Engine) error {
	if d.pipe == nil {
		d.cfg, d.eng = eng.Config(), eng
		return nil
	}
	return d.pipe.Reload(eng)
}

// overlay lays the current rule changes over cfg (a reload's).
func (d *Daemon) overlay(cfg *config.Config) *config.Config {
	ch := d.changes.Load()
	if ch == nil || len(ch.Added)+len(ch.Deleted) == 0 {
		return cfg
	}
	return cfg.Overlaid(ch.Added, ch.globs())
}
