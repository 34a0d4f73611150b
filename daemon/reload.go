package daemon

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/reactord/reactord/config"
)

// watchInterval is how often the configuration files are looked at.
const watchInterval = 250 * time.Millisecond

// hashLimit bounds the files whose content is hashed on every look (a
// configuration file is a few kilobytes; a larger one is compared by size
// and modification time only).
const hashLimit = 4 << 20

// fileStamp is what the watcher compares of one file.
type fileStamp struct {
	exists bool
	size   int64
	mtime  time.Time
	sum    [sha256.Size]byte
}

// snapshot maps absolute file names to their stamps.
type snapshot map[string]fileStamp

func (s snapshot) equal(o snapshot) bool {
	if len(s) != len(o) {
		return false
	}
	for k, v := range s {
		if w, ok := o[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// stampFile reads one file's stamp; a missing or unreadable file is a
// stamp of its own (exists false).
func stampFile(name string) fileStamp {
	st, err := os.Stat(name)
	if err != nil {
		return fileStamp{}
	}
	fs := fileStamp{exists: true, size: st.Size(), mtime: st.ModTime()}
	if st.Mode().IsRegular() && st.Size() <= hashLimit {
		if f, err := os.Open(name); err == nil {
			h := sha256.New()
			_, _ = io.Copy(h, io.LimitReader(f, hashLimit+1))
			f.Close()
			copy(fs.sum[:], h.Sum(nil))
		}
	}
	return fs
}

// configWatcher reports a change to the configuration files only once they
// have stayed the same for settle: a file being written in place (an
// editor, configuration management, `: >` then a rewrite) is not read half
// written. It compares each file's size, modification time and content
// hash, so a rewrite of the same length within one tick of a coarse clock
// is still seen.
type configWatcher struct {
	conf   string
	settle time.Duration

	seen      snapshot  // the files as last loaded (or refused)
	pending   snapshot  // the latest state differing from seen
	pendingAt time.Time // when pending was first observed in that state
}

func newConfigWatcher(conf string, files []string, settle time.Duration) *configWatcher {
	w := &configWatcher{conf: conf, settle: settle}
	w.seen = w.take(files)
	return w
}

// files lists the files whose change triggers a reload: the ones read last
// time plus any *.conf of a master.d directory (new include files).
func (w *configWatcher) files(extra []string) []string {
	out := make([]string, 0, len(w.seen)+len(extra)+1)
	for f := range w.seen {
		out = append(out, f)
	}
	out = append(out, extra...)
	if st, err := os.Stat(w.conf); err == nil && st.IsDir() {
		more, _ := filepath.Glob(filepath.Join(w.conf, "*.conf"))
		out = append(out, more...)
	} else {
		more, _ := filepath.Glob(filepath.Join(filepath.Dir(w.conf), "master.d", "*.conf"))
		out = append(out, more...)
	}
	return out
}

func (w *configWatcher) take(files []string) snapshot {
	out := make(snapshot, len(files))
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			abs = f
		}
		if _, done := out[abs]; !done {
			out[abs] = stampFile(abs)
		}
	}
	return out
}

// poll looks at the files and returns the snapshot to load when they
// changed and have been stable for settle since their last change, else
// nil.
func (w *configWatcher) poll(now time.Time) snapshot {
	cur := w.take(w.files(nil))
	switch {
	case cur.equal(w.seen):
		w.pending = nil
		return nil
	case w.pending == nil || !cur.equal(w.pending):
		w.pending, w.pendingAt = cur, now
		return nil
	case now.Sub(w.pendingAt) < w.settle:
		return nil
	}
	return cur
}

// current returns the files' state now, for a reload not caused by poll.
func (w *configWatcher) current() snapshot { return w.take(w.files(nil)) }

// loaded records that the configuration was loaded (or refused) from the
// files in state snap; files names those the loaded configuration read,
// which are watched from now on. A change made while loading differs from
// snap and is reported again.
func (w *configWatcher) loaded(snap snapshot, files []string) {
	seen := make(snapshot, len(snap)+len(files))
	for k, v := range snap {
		seen[k] = v
	}
	for k, v := range w.take(files) {
		if _, ok := seen[k]; !ok {
			seen[k] = v
		}
	}
	w.seen, w.pending = seen, nil
}

// reloader reloads the daemon's configuration on SIGHUP and when a
// configuration file changed and settled.
//
// A reload caused by a file change that would leave no rules while the
// running configuration has some is refused: it is logged as an error, the
// running configuration keeps running, and reactord_config_last_reload_successful
// goes to 0 (the file on disk is not what runs, as after a failed reload).
// The usual cause is a file truncated and not (yet) rewritten. SIGHUP
// applies such a configuration.
type reloader struct {
	conf  string
	log   *slog.Logger
	watch *configWatcher
	// apply builds the engine for cfg and swaps it in.
	apply func(cfg *config.Config) error
	// setOK sets reactord_config_last_reload_successful.
	setOK func(ok bool)
	// rules is the running configuration's rule count.
	rules int
}

func newReloader(conf string, cfg *config.Config, settle time.Duration, log *slog.Logger, apply func(*config.Config) error, setOK func(bool)) *reloader {
	if settle <= 0 {
		settle = DefaultReloadSettle
	}
	return &reloader{conf: conf, log: log, watch: newConfigWatcher(conf, cfg.Files, settle), apply: apply, setOK: setOK, rules: len(cfg.Rules)}
}

// run reloads on hup and on settled file changes until ctx ends.
func (r *reloader) run(ctx context.Context, hup <-chan os.Signal) {
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload("SIGHUP", r.watch.current(), true)
		case now := <-tick.C:
			if snap := r.watch.poll(now); snap != nil {
				r.reload("configuration file changed", snap, false)
			}
		}
	}
}

// reload loads the configuration; forced (SIGHUP) applies one without
// rules too.
func (r *reloader) reload(why string, snap snapshot, forced bool) {
	cfg, err := config.Load(r.conf)
	if err == nil && !forced && len(cfg.Rules) == 0 && r.rules > 0 {
		r.watch.loaded(snap, cfg.Files)
		r.setOK(false)
		r.log.Error("reload refused: the changed configuration has no rules",
			"why", why, "running_rules", r.rules, "detail", "the running configuration goes on",
			"fix", "send SIGHUP to apply it")
		return
	}
	if err == nil {
		err = r.apply(cfg)
	}
	if err != nil {
		r.watch.loaded(snap, nil)
		r.setOK(false)
		r.log.Error("reload failed; keeping the running configuration", "why", why, "err", err)
		return
	}
	r.watch.loaded(snap, cfg.Files)
	r.rules = len(cfg.Rules)
	r.setOK(true)
	r.log.Info("configuration reloaded", "why", why, "rules", len(cfg.Rules))
}

// reloader reloads the configuration into the pipeline.
func (d *Daemon) reloader() *reloader {
	return newReloader(d.opts.Config, d.cfg, d.opts.ReloadSettle, d.log, func(ncfg *config.Config) error {
		d.applyMu.Lock()
		defer d.applyMu.Unlock()
		neng, err := d.loadEngine(d.overlay(ncfg))
		if err != nil {
			return err
		}
		return d.pipe.Reload(neng)
	}, func(ok bool) { d.metrics.ReloadOK.Set(b2f(ok)) })
}
