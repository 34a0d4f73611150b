package actions

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/reactord/reactord/event"
)

// DryRun is the driver of `--dry-run`: it executes nothing and writes each
// action as one JSON line, {"tag": TAG, "chunk": {...}}, as soon as it is
// dispatched (each line is one Write; nothing is held in a buffer).
type DryRun struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewDryRun returns a dry-run driver writing to w.
func NewDryRun(w io.Writer) *DryRun { return &DryRun{w: w} }

// Name implements Driver.
func (d *DryRun) Name() string { return "dryrun" }

// AnswersAtOnce says a dry run prints without a round trip to Salt.
func (d *DryRun) AnswersAtOnce() bool { return true }

// Supports implements Driver: a dry run can show every reaction type.
func (d *DryRun) Supports(string) bool { return true }

// ShowsActions reports that the dry run shows each action itself, on its
// writer: its dispatches are logged at debug level (DispatchLevel).
func (d *DryRun) ShowsActions() bool { return true }

// Close implements Driver: the writer belongs to the caller.
func (d *DryRun) Close(context.Context) error { return nil }

// Do implements Driver.
func (d *DryRun) Do(_ context.Context, a Action) (Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.buf = AppendLine(d.buf[:0], a.Tag, a.Chunk)
	if _, err := d.w.Write(d.buf); err != nil {
		return Result{}, fmt.Errorf("writing the line: %w", err)
	}
	return Result{}, nil
}

// AppendLine appends `{"tag": TAG, "chunk": {...}}` and a newline to dst.
func AppendLine(dst []byte, tag string, c *event.Chunk) []byte {
	dst = append(dst, `{"tag":`...)
	dst, _ = event.AppendJSON(dst, tag)
	dst = append(dst, `,"chunk":`...)
	dst, _ = event.AppendJSON(dst, c)
	return append(dst, "}\n"...)
}

var _ Driver = (*DryRun)(nil)

// Describe implements Describer: the line the dry run prints.
func (d *DryRun) Describe(a Action) (string, error) {
	line := AppendLine(nil, a.Tag, a.Chunk)
	return string(line[:len(line)-1]), nil
}
