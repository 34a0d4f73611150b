package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestConfigWatcherSettles: a change is reported only once the files stayed
// the same for the settle time, each further change restarts the wait, and
// a rewrite of the same size and time is still seen (content hash).
func TestConfigWatcherSettles(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "reactor.conf")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("reactor: []\n")
	const settle = time.Second
	w := newConfigWatcher(conf, []string{conf}, settle)
	t0 := time.Now()
	if s := w.poll(t0); s != nil {
		t.Fatal("unchanged files reported")
	}
	write("")
	if s := w.poll(t0.Add(100 * time.Millisecond)); s != nil {
		t.Fatal("reported before settling")
	}
	write("reactor: [x]\n") // another change: the wait restarts
	if s := w.poll(t0.Add(900 * time.Millisecond)); s != nil {
		t.Fatal("reported before settling")
	}
	if s := w.poll(t0.Add(1800 * time.Millisecond)); s != nil {
		t.Fatal("reported 0.9s after the last change")
	}
	s := w.poll(t0.Add(1900 * time.Millisecond))
	if s == nil {
		t.Fatal("not reported 1s after the last change")
	}
	w.loaded(s, []string{conf})
	if s := w.poll(t0.Add(5 * time.Second)); s != nil {
		t.Fatal("reported again after loading")
	}
	// Same size, same modification time: only the content differs.
	st, _ := os.Stat(conf)
	write("reactor: [y]\n")
	if err := os.Chtimes(conf, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	w.poll(t0.Add(6 * time.Second))
	if s := w.poll(t0.Add(7 * time.Second)); s == nil {
		t.Fatal("a same-size rewrite within one clock tick is not seen")
	}
	// A new master.d file is watched too.
	w.loaded(w.current(), nil)
	if err := os.Mkdir(filepath.Join(dir, "master.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "master.d", "more.conf"), []byte("x: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.poll(t0.Add(8 * time.Second))
	if s := w.poll(t0.Add(9 * time.Second)); s == nil {
		t.Fatal("a new master.d file is not seen")
	}
}
