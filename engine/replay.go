package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/reactord/reactord/event"
)

// ReplayOptions control Replay.
type ReplayOptions struct {
	// Quiet suppresses the reaction lines.
	Quiet bool
	// Workers is the number of goroutines processing events; 0 means
	// GOMAXPROCS.
	Workers int
	// Errors receives one line per error ("file:line:col: message"); nil
	// discards them.
	Errors io.Writer
}

// Summary is the closing line of a replay.
type Summary struct {
	Events       int64   `json:"events"`
	Matched      int64   `json:"matched"`
	Reactions    int64   `json:"reactions"`
	Errors       int64   `json:"errors"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec int64   `json:"events_per_sec"`
}

type batch struct {
	seq   int
	lines [][]byte
	nums  []int // the number of each event's first line in the input
	out   []byte
	errs  []byte
}

const batchSize = 256

// Replay feeds every event of r through the engine, in parallel, and writes
// one JSON line per reaction, `{"tag": TAG, "chunk": {...}}`, to w in the
// order of the input. r holds events in any format event.RecordReader reads
// (one JSON envelope or TAG<tab>{json} per line, or the multi-line
// state.event pretty format); blank and comment lines are ignored. Errors
// name the first line of their event.
func (e *Engine) Replay(ctx context.Context, r io.Reader, w io.Writer, opt ReplayOptions) (Summary, error) {
	start := time.Now()
	base := e.snapshot()
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	todo := make(chan *batch, workers*2)
	done := make(chan *batch, workers*2)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range todo {
				e.runBatch(ctx, b, opt)
				done <- b
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(todo)
		rr := event.NewRecordReader(r)
		seq := 0
		cur := &batch{seq: seq}
		for {
			rec, num, err := rr.Next()
			if err == nil {
				cur.lines = append(cur.lines, rec)
				cur.nums = append(cur.nums, num)
				if len(cur.lines) < batchSize {
					continue
				}
				select {
				case todo <- cur:
				case <-ctx.Done():
					readErr <- ctx.Err()
					return
				}
				seq++
				cur = &batch{seq: seq}
				continue
			}
			if len(cur.lines) > 0 {
				todo <- cur
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			readErr <- err
			return
		}
	}()
	go func() { wg.Wait(); close(done) }()

	// Write batches in input order.
	pending := map[int]*batch{}
	next := 0
	var werr error
	for b := range done {
		pending[b.seq] = b
		for {
			nb, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if werr == nil && len(nb.out) > 0 {
				_, werr = w.Write(nb.out)
			}
			if opt.Errors != nil && len(nb.errs) > 0 {
				_, _ = opt.Errors.Write(nb.errs)
			}
		}
	}
	err := <-readErr
	if err == nil {
		err = werr
	}
	s := e.snapshot()
	sum := Summary{
		Events:    s.events - base.events,
		Matched:   s.matched - base.matched,
		Reactions: s.reactions - base.reactions,
		Errors:    s.errors - base.errors,
		Seconds:   time.Since(start).Seconds(),
	}
	if sum.Seconds > 0 {
		sum.EventsPerSec = int64(float64(sum.Events) / sum.Seconds)
	}
	sum.Seconds = float64(int64(sum.Seconds*1000)) / 1000
	return sum, err
}

type snap struct{ events, matched, reactions, errors int64 }

func (e *Engine) snapshot() snap {
	return snap{e.stats.Events.Load(), e.stats.Matched.Load(), e.stats.Reactions.Load(), e.stats.Errors.Load()}
}

func (e *Engine) runBatch(ctx context.Context, b *batch, opt ReplayOptions) {
	for i, line := range b.lines {
		res, err := e.ProcessLine(ctx, line)
		if err != nil {
			if opt.Errors != nil {
				b.errs = fmt.Appendf(b.errs, "line %d: %s\n", b.nums[i], err)
			}
			continue
		}
		if opt.Errors != nil {
			for _, fe := range res.Errors() {
				b.errs = fmt.Appendf(b.errs, "line %d: %s: %s\n", b.nums[i], res.Tag, fe)
			}
		}
		if opt.Quiet {
			continue
		}
		for _, c := range res.Chunks {
			b.out = AppendReactionLine(b.out, res.Tag, c)
		}
	}
	b.lines, b.nums = nil, nil
}

// AppendReactionLine appends `{"tag": TAG, "chunk": {...}}` and a newline.
func AppendReactionLine(dst []byte, tag string, c *event.Chunk) []byte {
	t, _ := json.Marshal(tag)
	dst = append(dst, `{"tag":`...)
	dst = append(dst, t...)
	dst = append(dst, `,"chunk":`...)
	dst, _ = event.AppendJSON(dst, c)
	return append(dst, "}\n"...)
}
