package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/engine"
	"github.com/reactord/reactord/reactor"
)

// RulesReport is what the running daemon reacts with: its configuration,
// when it was loaded, and each rule with what it decided since. /rules on
// --http serves it as JSON; `reactord rules` prints it.
type RulesReport struct {
	// Config is the configuration the rules come from (-c).
	Config string `json:"config"`
	// LoadedAt is when the rules were loaded (the start, or the last
	// reload that took).
	LoadedAt time.Time `json:"loaded_at"`
	// Rules are the rules in the configuration's order.
	Rules []RuleStatus `json:"rules"`
}

// RuleStatus is one rule of a RulesReport: where it is, its reaction
// files, and its reactions since the daemon started (counts survive a
// reload for a rule that keeps its id).
type RuleStatus struct {
	ID    string   `json:"id"`
	Glob  string   `json:"glob"`
	Pos   string   `json:"pos"`
	Files []string `json:"files"`
	// Dispatched counts the reactions dispatched (retries included), Held
	// those the loop guard, throttle, debounce or hop limit held back,
	// Failed those that failed (the driver, a retry that gave up, a file
	// that did not render, verify_high); a false when:, a collection or a
	// concurrency queue is counted when it reacts.
	Dispatched int64 `json:"dispatched"`
	Held       int64 `json:"held"`
	Failed     int64 `json:"failed"`
	// Last is the time of the last of those (zero: none yet).
	Last time.Time `json:"last,omitzero"`
	// Source is "salt-run reactor.add" for a rule added at run time
	// (Pos says so too), "" for the configuration's.
	Source string `json:"source,omitempty"`
	// AddedAt is when salt-run reactor.add added it, and AddedBy the
	// master it ran on.
	AddedAt time.Time `json:"added_at,omitzero"`
	AddedBy string    `json:"added_by,omitempty"`
}

// ruleBook follows the reactor's decision recorder (a reactor.Follower)
// and keeps the RulesReport: the engine's rules as each load brings them,
// and what each rule decided.
type ruleBook struct {
	mu     sync.Mutex
	report RulesReport
	counts map[string]*RuleStatus // by rule id, kept across reloads
}

// newRuleBook returns an empty book for the configuration conf.
func newRuleBook(conf string) *ruleBook {
	return &ruleBook{report: RulesReport{Config: conf}, counts: map[string]*RuleStatus{}}
}

// Configured takes the rules of a new engine (the start, a reload).
func (b *ruleBook) Configured(eng *engine.Engine) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.report.LoadedAt = time.Now().UTC()
	b.report.Rules = b.report.Rules[:0]
	for _, r := range eng.Config().Rules {
		files := make([]string, len(r.SLS))
		for i, s := range r.SLS {
			files[i] = s.Ref
		}
		if b.counts[r.ID] == nil {
			b.counts[r.ID] = &RuleStatus{}
		}
		st := RuleStatus{ID: r.ID, Glob: r.Glob, Pos: r.Pos.String(), Files: files}
		if r.Added != nil {
			st.Source, st.AddedAt, st.AddedBy = config.AddedSource, r.Added.At, r.Added.Master
		}
		b.report.Rules = append(b.report.Rules, st)
	}
}

// Decided counts a decision of a rule's reaction.
func (b *ruleBook) Decided(d reactor.Decision) {
	if d.RuleID == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.counts[d.RuleID]
	if c == nil {
		return // a rule a reload removed
	}
	switch {
	case d.Reason == reactor.Dispatched || d.Reason == reactor.Retried:
		c.Dispatched++
	case d.Reason == reactor.HopLimit || d.Reason == reactor.Throttle || d.Reason == reactor.Debounce ||
		strings.HasPrefix(string(d.Reason), string(reactor.LoopGuard)):
		c.Held++
	case d.Reason == reactor.Failed || d.Reason == reactor.RetryGaveUp || d.Reason == reactor.FileFailed || d.Reason == reactor.VerifyFailed:
		c.Failed++
	default:
		// A note (a false when:), a collection or a concurrency queue:
		// the event reacts or not later, and is counted then.
		return
	}
	c.Last = time.Now().UTC()
}

// Event, Tick and Stop: the book needs nothing of them.
func (b *ruleBook) Event(reactor.Event) {}
func (b *ruleBook) Tick(time.Time)      {}
func (b *ruleBook) Stop()               {}

// Report returns a copy of the report, with the counts.
func (b *ruleBook) Report() RulesReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	rep := b.report
	rep.Rules = make([]RuleStatus, len(b.report.Rules))
	for i, r := range b.report.Rules {
		c := b.counts[r.ID]
		r.Dispatched, r.Held, r.Failed, r.Last = c.Dispatched, c.Held, c.Failed, c.Last
		rep.Rules[i] = r
	}
	return rep
}

// ServeHTTP answers /rules with the report as JSON.
func (b *ruleBook) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(b.Report())
}

// FetchRules reads the rules of the daemon serving --http on addr.
func FetchRules(addr string) (RulesReport, error) {
	var rep RulesReport
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(strings.TrimSuffix(addr, "/") + "/rules")
	if err != nil {
		return rep, fmt.Errorf("asking the daemon for its rules: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("asking the daemon for its rules: %s (a reactord daemon's --http address?)", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return rep, fmt.Errorf("reading the daemon's rules: %w", err)
	}
	return rep, nil
}

// WriteText prints the report for people: the configuration and its load
// time, then a line per rule.
func (rep RulesReport) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "%s: %d rule(s), loaded %s\n", rep.Config, len(rep.Rules), rep.LoadedAt.Format(time.RFC3339)); err != nil {
		return err
	}
	for _, r := range rep.Rules {
		last := "never"
		if !r.Last.IsZero() {
			last = r.Last.Format(time.RFC3339)
		}
		pos := r.Pos
		if r.Source != "" {
			pos = fmt.Sprintf("%s at %s on %s", r.Source, r.AddedAt.Format(time.RFC3339), r.AddedBy)
		}
		if _, err := fmt.Fprintf(w, "%s  %s -> %s (%s): %d dispatched, %d held, %d failed, last %s\n",
			r.ID, r.Glob, strings.Join(r.Files, ", "), pos, r.Dispatched, r.Held, r.Failed, last); err != nil {
			return err
		}
	}
	return nil
}
