package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/reactions"
)

// loopTemplate is the amplifier: one reaction per item of a list
// taken from the event, so the event's size decides the rendered size.
const loopTemplate = `{{- range $i, $it := .data.items }}
item_{{ $i }}:
  local.test.ping:
    - tgt: {{ $it }}
{{- end }}
`

// heapPeak runs f and returns how far the heap grew above its size before
// f, sampling HeapAlloc every millisecond.
func heapPeak(f func()) uint64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	var end runtime.MemStats
	runtime.ReadMemStats(&end)
	peak = max(peak, end.HeapAlloc)
	if peak < base.HeapAlloc {
		return 0
	}
	return peak - base.HeapAlloc
}

// itemsEvent is an event body with n items of 9 bytes each.
func itemsEvent(id string, n int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id": %q, "items": [`, id)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"web%06d"`, i%1000000)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestRenderMemoryBounded sends events just under NATS's default 1 MB
// payload through a template that loops over their data, and checks that
// the heap stays under a ceiling: the loop's file is refused with a
// positioned error at the render bound, the event's other file still
// reacts, and a file rendered just inside the bounds fits too. Without the
// bounds the first case alone grows the heap by several hundred MB.
func TestRenderMemoryBounded(t *testing.T) {
	const ceiling = 64 << 20
	dir := t.TempDir()
	files := map[string]string{
		"reactor.conf": "reactor:\n  - 'big/*':\n    - " + filepath.Join(dir, "items.sls") + "\n    - " + filepath.Join(dir, "small.sls") + "\n",
		"items.sls":    loopTemplate,
		"small.sls":    "ping:\n  local.test.ping:\n    - tgt: {{ .data.id }}\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		t.Fatal(err)
	}
	eng := MustNew(cfg, Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()

	// Eight events of about 960 KB: 80,000 items each.
	var big [][]byte
	for i := range 8 {
		big = append(big, itemsEvent(fmt.Sprintf("web%d", i), 80000))
	}
	if n := len(big[0]); n < 900_000 || n > 1_000_000 {
		t.Fatalf("event is %d bytes, want about 960 KB", n)
	}
	// The largest loop the bounds let through: each item renders about 75
	// bytes of YAML text and prints two values.
	lim := reactions.DefaultLimits
	inside := min(lim.YAMLBytes/80, lim.Values/2) * 9 / 10
	near := itemsEvent("near", inside)

	start := time.Now()
	grew := heapPeak(func() {
		for i, raw := range big {
			res, err := eng.ProcessEnvelope(ctx, "big/1", raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Files) != 2 {
				t.Fatalf("event %d: %d files", i, len(res.Files))
			}
			var le *reactions.LimitError
			var pe *reactions.PosError
			// Errorf, not Fatalf: the heap is checked whatever happens.
			if err := res.Files[0].Err; !errors.As(err, &le) || !errors.As(err, &pe) || pe.File != filepath.Join(dir, "items.sls") || pe.Line < 2 {
				t.Errorf("event %d: items.sls: want a positioned render-limit error, got %v", i, err)
			}
			if res.Files[1].Err != nil || len(res.Chunks) != 1 || res.Chunks[0].Str("tgt") != fmt.Sprintf("web%d", i) {
				t.Errorf("event %d: small.sls: err %v, %d chunks", i, res.Files[1].Err, len(res.Chunks))
			}
		}
		res, err := eng.ProcessEnvelope(ctx, "big/2", near)
		if err != nil {
			t.Fatal(err)
		}
		if errs := res.Errors(); len(errs) > 0 || len(res.Chunks) != inside+1 {
			t.Errorf("an event inside the bounds: %d chunks, want %d; errors %v", len(res.Chunks), inside+1, errs)
		}
	})
	t.Logf("8 events of %d bytes and one of %d bytes (%d reactions): heap grew %.1f MB in %v (ceiling %d MB)",
		len(big[0]), len(near), inside+1, float64(grew)/(1<<20), time.Since(start).Round(time.Millisecond), ceiling>>20)
	if grew > ceiling {
		t.Errorf("heap grew %.1f MB rendering events that loop over their data, ceiling %d MB", float64(grew)/(1<<20), ceiling>>20)
	}
}
