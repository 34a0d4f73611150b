package sqlstore

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// A column is one varchar column whose values Write cuts to its width.
type column uint8

// The columns Write may cut, in the order prepare visits them.
const (
	colJIDsJID column = iota
	colReturnsFun
	colReturnsJID
	colReturnsID
	colEventsTag
	colEventsMasterID
	colEventIDsEventID
	colLedgerEventID
	colLedgerTag
	colLedgerStage
	colLedgerRule
	colLedgerFile
	colLedgerReactionID
	colLedgerJID
	colLedgerMinion
	colLedgerDetail
	numColumns
)

// columnInfo names each column ("table.column") and gives its width.
var columnInfo = [numColumns]struct {
	table, name string
	width       int
}{
	colJIDsJID:          {"jids", "jid", widthID},
	colReturnsFun:       {"salt_returns", "fun", widthFun},
	colReturnsJID:       {"salt_returns", "jid", widthID},
	colReturnsID:        {"salt_returns", "id", widthID},
	colEventsTag:        {"salt_events", "tag", widthID},
	colEventsMasterID:   {"salt_events", "master_id", widthID},
	colEventIDsEventID:  {"reactord_event_ids", "event_id", widthID},
	colLedgerEventID:    {"reactord_ledger", "event_id", widthID},
	colLedgerTag:        {"reactord_ledger", "tag", widthID},
	colLedgerStage:      {"reactord_ledger", "stage", widthStage},
	colLedgerRule:       {"reactord_ledger", "rule", widthText},
	colLedgerFile:       {"reactord_ledger", "file", widthText},
	colLedgerReactionID: {"reactord_ledger", "reaction_id", widthText},
	colLedgerJID:        {"reactord_ledger", "jid", widthID},
	colLedgerMinion:     {"reactord_ledger", "minion", widthID},
	colLedgerDetail:     {"reactord_ledger", "detail", widthDetail},
}

func (c column) String() string { return columnInfo[c].table + "." + columnInfo[c].name }

// CutColumns returns, as "table.column", every column whose values Write
// cuts when they are longer than the column (Salt's varchar(255) jid, id,
// tag and master_id, varchar(50) fun, and reactord_ledger's columns), in a
// fixed order. These are the values of Cuts.Count's column argument.
func CutColumns() []string {
	out := make([]string, numColumns)
	for c := range numColumns {
		out[c] = c.String()
	}
	return out
}

// Cuts counts the values written cut to the width of their columns, per
// column, and reports them: the first cut at once (table, column,
// original length), then at most one summary line per minute with the
// number of cuts since. One Cuts may serve several stores (a daemon's
// Lazy store and each database it opens); each daemon has its own.
type Cuts struct {
	n   [numColumns]atomic.Int64
	rep cutReporter
}

// NewCuts returns a Cuts that reports to log (nil: slog.Default()).
func NewCuts(log *slog.Logger) *Cuts {
	return &Cuts{rep: cutReporter{interval: time.Minute, logger: log}}
}

// Count returns how many values written to column ("table.column", one of
// CutColumns) were cut to the column's width, counted once per record
// when its write commits (a retried write counts once). It returns 0 for
// an unknown column.
func (c *Cuts) Count(column string) int64 {
	for col := range numColumns {
		if col.String() == column {
			return c.n[col].Load()
		}
	}
	return 0
}

// commit counts the cuts of a batch that was written and reports them.
func (c *Cuts) commit(t *cutTally) {
	if t == nil || !t.any {
		return
	}
	for col := range numColumns {
		if t.n[col] > 0 {
			c.n[col].Add(t.n[col])
		}
	}
	c.rep.report(t)
}

// cutTally is what one batch cut, per column.
type cutTally struct {
	n [numColumns]int64
	// longest is the greatest original length, in characters, cut in the
	// column; start is the beginning of the first value cut.
	longest [numColumns]int
	start   [numColumns]string
	any     bool
}

// add notes that a value of column c, originally s, was cut.
func (t *cutTally) add(c column, s string) {
	t.any = true
	t.n[c]++
	if n := utf8.RuneCountInString(s); n > t.longest[c] {
		t.longest[c] = n
	}
	if t.start[c] == "" {
		t.start[c] = cleanString(s, 64, false)
	}
}

// cutReporter logs cut values: the first one at once with its table,
// column and length, the next ones in a summary at most once per interval.
type cutReporter struct {
	mu       sync.Mutex
	logger   *slog.Logger
	interval time.Duration
	last     time.Time // when the last line was logged
	pending  [numColumns]int64
	longest  [numColumns]int
	timer    *time.Timer // armed while cuts wait for their summary
}

func (r *cutReporter) log() *slog.Logger {
	if r.logger != nil {
		return r.logger
	}
	return slog.Default()
}

// report logs the first cut of t at once when no line was logged for an
// interval, and holds the others for the summary.
func (r *cutReporter) report(t *cutTally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	n := t.n
	if r.timer == nil && (r.last.IsZero() || now.Sub(r.last) >= r.interval) {
		for c := range numColumns {
			if n[c] == 0 {
				continue
			}
			info := columnInfo[c]
			r.log().Warn("audit store: value cut to fit its column",
				"table", info.table, "column", info.name, "length", t.longest[c], "width", info.width, "start", t.start[c],
				"metric", "reactord_store_values_cut_total", "detail", "further cuts are counted and summarised at most once a minute")
			r.last = now
			n[c]--
			break
		}
	}
	held := false
	for c := range numColumns {
		if n[c] > 0 {
			r.pending[c] += n[c]
			r.longest[c] = max(r.longest[c], t.longest[c])
			held = true
		}
	}
	if held && r.timer == nil {
		r.timer = time.AfterFunc(max(r.last.Add(r.interval).Sub(now), 0), r.summary)
	}
}

// summary logs the cuts held since the last line.
func (r *cutReporter) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	var total int64
	var cols []string
	longest := 0
	for c := range numColumns {
		if r.pending[c] == 0 {
			continue
		}
		total += r.pending[c]
		cols = append(cols, fmt.Sprintf("%s=%d", c, r.pending[c]))
		longest = max(longest, r.longest[c])
	}
	r.pending = [numColumns]int64{}
	r.longest = [numColumns]int{}
	if total == 0 {
		return
	}
	r.last = time.Now()
	r.log().Warn("audit store: values cut to fit their columns",
		"count", total, "columns", strings.Join(cols, " "), "longest", longest, "since", r.interval.String())
}
