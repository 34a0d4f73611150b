// Package config loads a Salt master configuration (a file or a master.d
// directory) the way Salt merges it, and keeps what reactord uses: the
// `reactor:` rules, `file_roots` for salt:// paths and reactord's own
// `reactord:` section. Salt's other keys are ignored. Every problem is
// reported with file:line:col, all of them at once.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/suggest"
	"github.com/reactord/reactord/internal/yaml11"
)

// Config is a loaded reactor configuration.
type Config struct {
	// Files are the configuration files read, in the order they were merged.
	Files []string
	// Rules are the reactor rules in Salt's order.
	Rules []Rule
	// FileRoots maps a saltenv to its directories, for salt:// paths.
	FileRoots map[string][]string
	// Settings is the reactord: section.
	Settings Settings
	// Warnings are problems Salt tolerates silently (such as a rule entry
	// with two keys, which Salt skips); reactord skips them too and reports
	// them. `reactord check` treats them as errors.
	Warnings []error
	// ReactorFile is set when `reactor:` names a file holding the rule list.
	ReactorFile string
	// Topology is what the master's configuration says about the masters
	// around it (syndic, cluster).
	Topology Topology
}

// Rule is one entry of the reactor list: a tag glob and the reaction files
// it triggers.
type Rule struct {
	// Glob is the tag glob, matched with Python fnmatch semantics.
	Glob string
	// SLS are the reaction file references in order.
	SLS []SLS
	// Pos locates the rule.
	Pos Pos
	// Options are reactord's rule options (the reactord-only form of a
	// rule: {glob: {sls: ..., when: ..., throttle: ..., debounce: ...}}).
	Options RuleOptions
	// ID identifies the rule across reloads and replicas: the rule's id:
	// option, else a hash of its glob and its file references as written
	// (RuleID), with "-N" added to the Nth rule of the same text. State
	// that outlives an event (throttle, debounce) is keyed by it, never by
	// the rule's position.
	ID string
	// IDPos locates an explicit id: (zero when the ID is the hash).
	IDPos Pos
	// Added is set for a rule added at run time (salt-run reactor.add),
	// not read from the configuration (see Overlaid).
	Added *Added
}

// RuleID is the identity of a rule without an id: option: "r" and the
// first 12 hex digits of the SHA-256 of its tag glob and file references,
// as written (not their resolved paths, so replicas whose files lie
// elsewhere agree).
func RuleID(glob string, refs []string) string {
	h := sha256.New()
	h.Write([]byte(glob))
	for _, r := range refs {
		h.Write([]byte{0})
		h.Write([]byte(r))
	}
	return "r" + hex.EncodeToString(h.Sum(nil))[:12]
}

// ruleIDPattern is what an explicit id: may hold (it names shared-state
// keys and log fields).
var ruleIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// assignIDs gives every rule its ID: its id: option, else RuleID with an
// occurrence number from the second rule of the same text on. Two rules
// with one explicit id are an error.
func (l *loader) assignIDs(cfg *Config) {
	seen := map[string]int{}
	explicit := map[string]Pos{}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		if r.ID != "" {
			if p, dup := explicit[r.ID]; dup {
				l.errs = append(l.errs, fmt.Errorf("%s: rule id %q is already the id of the rule at %s", r.IDPos, r.ID, p))
			}
			explicit[r.ID] = r.IDPos
			continue
		}
		refs := make([]string, len(r.SLS))
		for j, s := range r.SLS {
			refs[j] = s.Ref
		}
		id := RuleID(r.Glob, refs)
		seen[id]++
		if n := seen[id]; n > 1 {
			id = fmt.Sprintf("%s-%d", id, n)
		}
		r.ID = id
	}
}

// RuleOptions are what a rule can say beyond Salt's form.
type RuleOptions struct {
	// When is an expr-lang condition over tag and data; empty means always.
	When    string
	WhenPos Pos
	// Key is an expr-lang expression naming what Throttle and Debounce
	// count per; empty means the event's minion.
	Key    string
	KeyPos Pos
	// ThrottleCount reactions at most per ThrottlePer and key (0: none).
	ThrottleCount int
	ThrottlePer   time.Duration
	// Debounce reacts once, with the last event, after this quiet period.
	Debounce time.Duration
	// Concurrency bounds the rule's reactions in flight per key (0: no
	// bound): a reaction is in flight until every target of its jobs
	// returned or the job timeout passed; the events past the bound wait,
	// in order, unacknowledged.
	Concurrency    int
	ConcurrencyPos Pos
	// Retry runs a local reaction's job again on the minions where it
	// failed (Retry.Attempts 0: never).
	Retry Retry
	// Collect gathers the rule's events and reacts once for them
	// (Collect.Within 0: not).
	Collect Collect
	// Guard is the loop guard's evidence for the rule's reactions:
	// GuardBeacons (the default, ""), GuardMinion or GuardOff.
	Guard    string
	GuardPos Pos
	// From narrows or widens the events the rule reacts to by who sent
	// them: "" (the default) refuses forged minion events (a tag naming
	// another minion, a family only the master fires), FromMaster takes
	// only events no minion sent, FromMinion only events a minion sent
	// (forged ones refused), FromAny every event.
	From    string
	FromPos Pos
	// LiteralTarget, when true, refuses a reaction whose tgt holds a value
	// printed from event data with characters that widen a target (glob,
	// compound, range, list or regex syntax); nil means the reactord-wide
	// literal_target setting.
	LiteralTarget *bool
}

// The loop guard's modes, a rule's guard option.
const (
	// GuardBeacons holds a reaction back from the events its own jobs
	// cause: their returns and progress, the beacons of their minions
	// while they run and a settle window after, a minion's start before
	// its job returned, and the events it fires itself.
	GuardBeacons = "beacons"
	// GuardMinion holds a reaction back from every event of its job's
	// minions until the job returned and the settle window passed.
	GuardMinion = "minion"
	// GuardOff leaves the rule's reactions to the hop limit alone.
	GuardOff = "off"
)

// Retry is a rule's retry option: {attempts: N, backoff: DURATION, on:
// [failed, no_return]}.
type Retry struct {
	// Attempts is how many times a job is run again at most.
	Attempts int
	// Backoff is the wait before the first retry, doubled for each next.
	Backoff time.Duration
	// OnFailed retries minions whose return says the job failed
	// (success false or a non-zero retcode); OnNoReturn those that did
	// not return within the job timeout.
	OnFailed, OnNoReturn bool
	Pos                  Pos
}

// Collect is a rule's collect option: {within: DURATION, quiet: DURATION,
// key: EXPR, max: N}.
type Collect struct {
	// Within is the window, from a key's first event, after which the
	// rule reacts once with every event gathered.
	Within time.Duration
	// Quiet, when set, reacts earlier, once no event came for it.
	Quiet time.Duration
	// Max bounds the events gathered (default 1000); later ones are
	// left out, counted and logged. Without a key (the rule's key
	// option) a rule's events all go to one collection.
	Max int
	Pos Pos
}

// DefaultCollectMax bounds a collection without max.
const DefaultCollectMax = 1000

// A rule's from option.
const (
	// FromMaster reacts only to events no minion sent.
	FromMaster = "master"
	// FromMinion reacts only to events a minion sent, not forged.
	FromMinion = "minion"
	// FromAny reacts to every event, forged minion events included.
	FromAny = "any"
)

// SLS is one reaction file reference of a rule.
type SLS struct {
	// Ref is the reference as written (a path, a glob or a salt:// URL).
	Ref string
	// Pattern is the local path pattern to glob: relative paths resolved
	// against the configuration file's folder, salt:// URLs against
	// file_roots. Empty when a salt:// file was not found.
	Pattern string
	// Pos locates the reference.
	Pos Pos
}

// Settings are reactord's own options, from the `reactord:` section.
type Settings struct {
	NATS    string
	Driver  string
	DataDir string
	// LogLevel is "debug", "info", "warn", "error" or "quiet" (nothing),
	// mapped from Salt's log levels; empty means info.
	LogLevel string
	Workers  int
	// Store is the audit store URL (without a password: that one is in
	// StoreFile); KeepJobs its retention.
	Store    string
	KeepJobs time.Duration
	// StoreFile is a file holding the audit store URL (store_file).
	StoreFile string
	// Settle, JobTimeout and MaxHops configure the loop guard.
	Settle     time.Duration
	JobTimeout time.Duration
	MaxHops    int
	// LiteralTarget is the default of the rules' literal_target option.
	LiteralTarget bool
	// Renderer is how reaction files without a shebang, or with Salt's
	// Jinja one, are read: RendererAuto (""), RendererJinja or
	// RendererGotmpl (--renderer; jinja: true is RendererJinja).
	Renderer string
	// Flags are the other daemon flags the section sets, by flag name.
	Flags map[string]FlagSetting
}

// Renderer modes (Settings.Renderer).
const (
	// RendererAuto chooses each file's renderer as Salt does: its #!
	// line, else Salt's default jinja|yaml; a file without a shebang
	// that is unmistakably a Go template is read as one.
	RendererAuto = "auto"
	// RendererJinja reads every file without a shebang as Salt's Jinja.
	RendererJinja = "jinja"
	// RendererGotmpl reads every file without a shebang, or with Salt's
	// Jinja one, as a Go template (reactord's earlier default).
	RendererGotmpl = "gotmpl"
)

// Renderers lists the renderer modes.
var Renderers = []string{RendererAuto, RendererJinja, RendererGotmpl}

// logLevels maps Salt's log levels, and reactord's warn, to the levels
// reactord logs at. reactord has no trace, garbage or profile messages:
// the levels below info show debug, profile (between debug and info in
// Salt) shows info, and critical shows errors.
var logLevels = map[string]string{
	"all": "debug", "garbage": "debug", "trace": "debug", "debug": "debug",
	"profile": "info", "info": "info",
	"warning": "warn", "warn": "warn",
	"error": "error", "critical": "error",
	"quiet": "quiet",
}

// DriverNames are the drivers reactord knows (the daemon's --driver).
var DriverNames = []string{"dryrun", "saltapi", "master", "exec", "nats", "null"}

// checkDriver refuses a driver name reactord does not know, naming the
// likely one.
func (l *loader) checkDriver(file string, vn *yaml11.Node, d string) {
	if slices.Contains(DriverNames, d) {
		return
	}
	why := ""
	if near := suggest.Closest(d, DriverNames); near != "" {
		why = fmt.Sprintf(" (did you mean %s?)", near)
	}
	l.errorf(file, vn, "reactord.driver %q is not a driver: want one of %s%s", d, strings.Join(DriverNames, ", "), why)
}

// logLevelNames lists the accepted log_level values, Salt's order.
const logLevelNames = "all, garbage, trace, debug, profile, info, warning, error, critical, quiet"

// ParseLogLevel maps a log level name, Salt's or reactord's, to the
// level reactord logs at ("debug", "info", "warn", "error" or "quiet").
func ParseLogLevel(s string) (string, error) {
	if lv, ok := logLevels[strings.ToLower(s)]; ok {
		return lv, nil
	}
	return "", fmt.Errorf("log level must be one of %s (Salt's levels; warn is warning), not %q", logLevelNames, s)
}

// SlogLevel is the level of LogLevel: "debug", "info" (or empty), "warn",
// "error", or "quiet", which logs nothing.
func (s Settings) SlogLevel() slog.Level {
	switch s.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	case "quiet":
		return slog.LevelError + 1000
	}
	return slog.LevelInfo
}

// Pos is a position in a configuration file.
type Pos = position.Pos

// Error is a configuration problem at a position.
type Error = position.Error

// doc is one parsed configuration file.
type doc struct {
	path string
	root *yaml11.Node
}

type loader struct {
	errs     []error
	warnings []error
}

func (l *loader) errorf(file string, n *yaml11.Node, format string, args ...any) {
	l.errs = append(l.errs, &Error{Pos: nodePos(file, n), Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) warnf(file string, n *yaml11.Node, format string, args ...any) {
	l.warnings = append(l.warnings, &Error{Pos: nodePos(file, n), Msg: fmt.Sprintf(format, args...)})
}

func nodePos(file string, n *yaml11.Node) Pos {
	if n == nil {
		return Pos{File: file, Line: 1, Col: 1}
	}
	return Pos{File: file, Line: max(n.Line, 1), Col: max(n.Column, 1)}
}

// Load reads a configuration file, a master.d directory, or Salt's
// configuration directory (the one `salt-master -c DIR` takes: it holds a
// `master` file and no *.conf, and stands for DIR/master). A file's
// `master.d/*.conf` (Salt's default_include) and `include:` files are merged
// as Salt merges them: reactor lists from included files concatenate in
// sorted file order without repeating equal entries, and replace a reactor
// list of the main file. The returned error joins every problem found.
func Load(path string) (*Config, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	l := &loader{}
	var main *doc
	// Salt applies default_include (master.d/*.conf) and then include, each
	// with a top-level update: a reactor list from the include group
	// replaces master.d's, which replaces the main file's.
	var groups [][]*doc
	if st.IsDir() {
		files := confGlob(filepath.Join(path, "*.conf"))
		if len(files) == 0 {
			// Salt's -c names the configuration directory: its master file.
			if m, err := os.Stat(filepath.Join(path, "master")); err == nil && !m.IsDir() {
				return Load(filepath.Join(path, "master"))
			}
			return nil, fmt.Errorf("reading configuration: %s holds no *.conf file and no Salt master file (give -c a master configuration file, Salt's configuration directory, or a master.d-style directory of *.conf files)", path)
		}
		var g []*doc
		for _, f := range files {
			if d := l.parse(f); d != nil {
				g = append(g, d)
			}
		}
		groups = append(groups, g)
	} else {
		main = l.parse(path)
		if main != nil {
			groups = l.includes(main, path)
		}
	}
	cfg := &Config{FileRoots: map[string][]string{}}
	var docs []*doc
	if main != nil {
		docs = append(docs, main)
	}
	for _, g := range groups {
		docs = append(docs, g...)
	}
	for _, d := range docs {
		cfg.Files = append(cfg.Files, d.path)
	}

	var reactorDocs []*doc
	if main != nil && lookup(main.root, "reactor") != nil {
		reactorDocs = []*doc{main}
	}
	for _, g := range groups {
		var withReactor []*doc
		for _, d := range g {
			if lookup(d.root, "reactor") != nil {
				withReactor = append(withReactor, d)
			}
		}
		if len(withReactor) > 0 {
			reactorDocs = withReactor
		}
	}
	for _, d := range reactorDocs {
		l.rules(cfg, d)
	}
	for _, d := range docs {
		l.typos(d)
	}
	// file_roots and reactord: merged recursively, later files win.
	for _, d := range docs {
		if fr := lookup(d.root, "file_roots"); fr != nil {
			l.fileRoots(cfg, d.path, fr)
		}
		if rs := lookup(d.root, "reactord"); rs != nil {
			l.settings(cfg, d.path, rs)
		}
		l.topology(cfg, d)
	}
	if len(cfg.FileRoots) == 0 {
		cfg.FileRoots["base"] = []string{"/srv/salt"}
	}
	l.resolveSLS(cfg)
	l.assignIDs(cfg)
	cfg.Warnings = l.warnings
	if len(l.errs) > 0 {
		return cfg, errors.Join(l.errs...)
	}
	return cfg, nil
}

// includes reads what the main configuration file at path brings in, as
// Salt does: its master.d/*.conf (default_include), then its include:
// files, each group in sorted file order, no file twice.
func (l *loader) includes(main *doc, path string) [][]*doc {
	dir := filepath.Dir(path)
	mainAbs, _ := filepath.Abs(path)
	seen := map[string]bool{mainAbs: true}
	load := func(pats []string) []*doc {
		var g []*doc
		for _, p := range pats {
			for _, f := range confGlob(p) {
				abs, _ := filepath.Abs(f)
				if seen[abs] {
					continue
				}
				seen[abs] = true
				if d := l.parse(f); d != nil {
					g = append(g, d)
				}
			}
		}
		return g
	}
	groups := [][]*doc{load([]string{filepath.Join(dir, "master.d", "*.conf")})}
	var pats []string
	if inc := lookup(main.root, "include"); inc != nil {
		for _, s := range l.stringList(main.path, inc, "include") {
			if strings.HasPrefix(s, "~/") {
				if home, err := os.UserHomeDir(); err == nil {
					s = filepath.Join(home, s[2:])
				}
			}
			if !filepath.IsAbs(s) {
				s = filepath.Join(dir, s)
			}
			pats = append(pats, s)
		}
	}
	return append(groups, load(pats))
}

func (l *loader) parse(path string) *doc {
	src, err := os.ReadFile(path)
	if err != nil {
		l.errs = append(l.errs, fmt.Errorf("reading %s: %w", path, err))
		return nil
	}
	root, err := yaml11.Parse(src)
	if err != nil {
		l.errs = append(l.errs, yamlError(path, src, err))
		return nil
	}
	if root == nil {
		return &doc{path: path}
	}
	if root.Kind != yaml11.MappingNode {
		l.errorf(path, root, "a Salt configuration file must be a mapping of options")
		return nil
	}
	if !root.WithinSize(1000000) {
		l.errorf(path, root, "the configuration has more than 1000000 nodes once its aliases are expanded")
		return nil
	}
	l.duplicates(path, root)
	return &doc{path: path, root: root}
}

// duplicates reports duplicate mapping keys anywhere in n, which Salt's
// YAML loader rejects.
func (l *loader) duplicates(file string, n *yaml11.Node) {
	if n.Kind == yaml11.MappingNode {
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml11.ScalarNode {
				id := fmt.Sprintf("%#v", yaml11.Resolve(k.Text))
				if k.Style != yaml11.Plain {
					id = fmt.Sprintf("%#v", k.Text)
				}
				if seen[id] {
					l.errorf(file, k, "found conflicting ID '%s'", k.Text)
				}
				seen[id] = true
			}
		}
	}
	for _, c := range n.Content {
		l.duplicates(file, c)
	}
}

var aliasMsg = regexp.MustCompile(`alias '([^']*)'`)

// yamlError positions a YAML error. When the parser gave no line (an
// undefined alias), the alias is looked up in the source.
func yamlError(path string, src []byte, err error) *Error {
	var ye *yaml11.Error
	if !errors.As(err, &ye) {
		return &Error{Pos: Pos{File: path, Line: 1, Col: 1}, Msg: err.Error()}
	}
	line, col := ye.Line, ye.Column
	if line == 0 {
		if m := aliasMsg.FindStringSubmatch(ye.Msg); m != nil {
			if i := strings.Index(string(src), "*"+m[1]); i >= 0 {
				line = strings.Count(string(src[:i]), "\n") + 1
				col = i - strings.LastIndex(string(src[:i]), "\n")
			}
		}
	}
	msg := ye.Msg
	if strings.HasPrefix(msg, "found undefined alias") || msg == "did not find expected alphabetic or numeric character" {
		if glob, start := starToken(src, line, col); glob != "" {
			col = start
			msg += fmt.Sprintf(": an unquoted * starts a YAML alias; quote the glob: '%s'", glob)
		}
	}
	return &Error{Pos: Pos{File: path, Line: max(line, 1), Col: max(col, 1)}, Msg: msg}
}

// starToken returns the token (up to ": ", a blank, a comma or a closing
// bracket) holding the '*' at line:col (1-based) when it starts with '*'
// (`*start`, `*/start`, `*start*`), and the column where it starts; ""
// otherwise.
func starToken(src []byte, line, col int) (string, int) {
	if line < 1 || col < 1 {
		return "", 0
	}
	lines := strings.Split(string(src), "\n")
	if line > len(lines) {
		return "", 0
	}
	text := []rune(strings.TrimRight(lines[line-1], "\r"))
	if col > len(text) || text[col-1] != '*' {
		return "", 0
	}
	start := col - 1
	for start > 0 && !strings.ContainsRune(" \t[{,", text[start-1]) {
		start--
	}
	if text[start] != '*' {
		return "", 0
	}
	tok := string(text[start:])
	if i := strings.IndexAny(tok, " \t,]}"); i >= 0 {
		tok = tok[:i]
	}
	return strings.TrimSuffix(tok, ":"), start + 1
}

// confGlob expands a configuration glob as Python's glob does for Salt:
// sorted, without dotfiles (editor lock and backup files).
func confGlob(pattern string) []string {
	files, _ := filepath.Glob(pattern)
	out := files[:0]
	for _, f := range files {
		if !strings.HasPrefix(filepath.Base(f), ".") {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// lookup returns the value node of a top-level key.
func lookup(root *yaml11.Node, key string) *yaml11.Node {
	if root == nil || root.Kind != yaml11.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		if k.Kind == yaml11.ScalarNode && k.Text == key {
			return root.Content[i+1]
		}
	}
	return nil
}

// scalarString returns a scalar's value when YAML types it as a string.
func scalarString(n *yaml11.Node) (string, bool) {
	if n == nil || n.Kind != yaml11.ScalarNode {
		return "", false
	}
	if n.Style != yaml11.Plain || n.Tag == "tag:yaml.org,2002:str" {
		return n.Text, true
	}
	s, ok := yaml11.Resolve(n.Text).(string)
	return s, ok
}

func (l *loader) stringList(file string, n *yaml11.Node, what string) []string {
	if s, ok := scalarString(n); ok {
		return []string{s}
	}
	if n.Kind != yaml11.SequenceNode {
		l.errorf(file, n, "%s must be a string or a list of strings", what)
		return nil
	}
	var out []string
	for _, c := range n.Content {
		s, ok := scalarString(c)
		if !ok {
			l.errorf(file, c, "%s entries must be strings", what)
			continue
		}
		out = append(out, s)
	}
	return out
}

func (l *loader) rules(cfg *Config, d *doc) {
	n := lookup(d.root, "reactor")
	if s, ok := scalarString(n); ok {
		l.reactorFile(cfg, d.path, n, s)
		return
	}
	if n.Kind == yaml11.ScalarNode && yaml11.Resolve(n.Text) == nil && n.Style == yaml11.Plain {
		return // reactor: (empty) is Salt's default, an empty list
	}
	if n.Kind != yaml11.SequenceNode {
		l.errorf(d.path, n, "reactor must be a list of {tag glob: SLS path or list of paths} entries")
		return
	}
	l.ruleList(cfg, d.path, n)
}

func (l *loader) ruleList(cfg *Config, file string, n *yaml11.Node) {
	for _, item := range n.Content {
		if item.Kind != yaml11.MappingNode {
			l.warnf(file, item, "reactor entry is not a mapping {tag glob: SLS paths}; Salt skips it")
			continue
		}
		if len(item.Content) != 2 {
			l.warnf(file, item, "reactor entry has %d keys; Salt only uses entries with exactly one tag glob and skips this one", len(item.Content)/2)
			continue
		}
		kn, vn := item.Content[0], item.Content[1]
		glob, ok := scalarString(kn)
		if !ok {
			l.errorf(file, kn, "tag glob %q is not a string after YAML typing; quote it", kn.Text)
			continue
		}
		rule := Rule{Glob: glob, Pos: nodePos(file, kn)}
		if s, ok := scalarString(vn); ok {
			rule.SLS = append(rule.SLS, SLS{Ref: s, Pos: nodePos(file, vn)})
		} else if vn.Kind == yaml11.SequenceNode {
			l.slsList(file, vn, &rule)
		} else if vn.Kind == yaml11.MappingNode {
			l.ruleOptions(file, vn, &rule)
		} else {
			l.warnf(file, vn, "tag glob %q maps to neither a path nor a list of paths; Salt ignores it", glob)
		}
		if l.duplicateRule(cfg, rule) {
			continue
		}
		cfg.Rules = append(cfg.Rules, rule)
	}
}

func (l *loader) slsList(file string, vn *yaml11.Node, rule *Rule) {
	for _, c := range vn.Content {
		s, ok := scalarString(c)
		if !ok {
			l.warnf(file, c, "SLS path is not a string; Salt cannot render it")
			continue
		}
		rule.SLS = append(rule.SLS, SLS{Ref: s, Pos: nodePos(file, c)})
	}
}

// ruleOptions reads reactord's own rule form.
func (l *loader) ruleOptions(file string, n *yaml11.Node, rule *Rule) {
	haveSLS := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		k, _ := scalarString(kn)
		str := func() (string, bool) {
			s, ok := scalarString(vn)
			if !ok || s == "" {
				l.errorf(file, vn, "rule option %s must be a non-empty string", k)
			}
			return s, ok && s != ""
		}
		dur := func(v *yaml11.Node, what string) time.Duration {
			s, ok := scalarString(v)
			d, err := time.ParseDuration(s)
			if !ok || err != nil || d <= 0 {
				l.errorf(file, v, "%s must be a positive duration such as 10s or 5m", what)
				return 0
			}
			return d
		}
		switch k {
		case "sls":
			haveSLS = true
			if s, ok := scalarString(vn); ok {
				rule.SLS = append(rule.SLS, SLS{Ref: s, Pos: nodePos(file, vn)})
			} else if vn.Kind == yaml11.SequenceNode {
				l.slsList(file, vn, rule)
			} else {
				l.errorf(file, vn, "sls must be a path or a list of paths")
			}
		case "when":
			if s, ok := str(); ok {
				rule.Options.When, rule.Options.WhenPos = s, nodePos(file, vn)
			}
		case "key":
			if s, ok := str(); ok {
				rule.Options.Key, rule.Options.KeyPos = s, nodePos(file, vn)
			}
		case "id":
			if s, ok := str(); ok && ruleIDPattern.MatchString(s) {
				rule.ID, rule.IDPos = s, nodePos(file, vn)
			} else {
				l.errorf(file, vn, "id must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")
			}
		case "debounce":
			rule.Options.Debounce = dur(vn, "debounce")
		case "concurrency":
			c, ok := yaml11.Resolve(vn.Text).(int64)
			if vn.Kind != yaml11.ScalarNode || !ok || c < 1 || c > 1<<20 {
				l.errorf(file, vn, "concurrency must be a positive integer: the reactions of the rule in flight at once per key")
				continue
			}
			rule.Options.Concurrency, rule.Options.ConcurrencyPos = int(c), nodePos(file, vn)
		case "guard":
			if b, isBool := yaml11.Resolve(vn.Text).(bool); vn.Kind == yaml11.ScalarNode && isBool && !b && vn.Style == yaml11.Plain {
				// YAML 1.1 reads a bare off (no, false) as false.
				rule.Options.Guard, rule.Options.GuardPos = GuardOff, nodePos(file, vn)
				continue
			}
			if s, ok := str(); ok {
				if s != GuardBeacons && s != GuardMinion && s != GuardOff {
					l.errorf(file, vn, "guard must be %s (the default: a reaction's own job, its beacons and the minion's restart hold it back), %s (any event from its job's minions, until the job returned and settled) or %s", GuardBeacons, GuardMinion, GuardOff)
					continue
				}
				rule.Options.Guard, rule.Options.GuardPos = s, nodePos(file, vn)
			}
		case "literal_target":
			b, ok := yaml11.Resolve(vn.Text).(bool)
			if vn.Kind != yaml11.ScalarNode || !ok {
				l.errorf(file, vn, "literal_target must be true or false")
				continue
			}
			rule.Options.LiteralTarget = &b
		case "from":
			if s, ok := str(); ok {
				l.fromOption(file, vn, s, rule)
			}
		case "throttle":
			l.throttleOption(file, vn, rule, dur)
		case "retry":
			l.retryOption(file, vn, rule, dur)
		case "collect":
			l.collectOption(file, vn, rule, dur)
		default:
			l.errorf(file, kn, "unknown rule option %q (known: sls, id, when, throttle, debounce, concurrency, retry, collect, key, guard, literal_target, from)", kn.Text)
		}
	}
	if !haveSLS {
		l.errorf(file, n, "a rule with options needs sls: the reaction file(s)")
	}
	if c := rule.Options.Collect; c.Within > 0 && (rule.Options.Debounce > 0 || rule.Options.Concurrency > 0) {
		l.errs = append(l.errs, &Error{Pos: c.Pos, Msg: "collect does not go with debounce or concurrency on one rule: it already reacts once per collection"})
	}
	if rule.Options.Concurrency > 0 && rule.Options.Debounce > 0 {
		l.errs = append(l.errs, &Error{Pos: rule.Options.ConcurrencyPos, Msg: "concurrency and debounce do not go together on one rule: debounce already reacts once per key"})
	}
}

// fromOption reads a rule's from: master, minion or any.
func (l *loader) fromOption(file string, vn *yaml11.Node, s string, rule *Rule) {
	if s != FromMaster && s != FromMinion && s != FromAny {
		l.errorf(file, vn, "from must be %s (events no minion sent), %s (events a minion sent, forged ones refused) or %s (every event, forged minion events included); without it forged minion events are refused", FromMaster, FromMinion, FromAny)
		return
	}
	rule.Options.From, rule.Options.FromPos = s, nodePos(file, vn)
}

// collectOption reads a rule's collect: {within: DURATION, quiet:
// DURATION, key: EXPR, max: N}.
func (l *loader) collectOption(file string, vn *yaml11.Node, rule *Rule, dur func(*yaml11.Node, string) time.Duration) {
	if vn.Kind != yaml11.MappingNode {
		l.errorf(file, vn, "collect must be a mapping {within: DURATION, quiet: DURATION, key: EXPR, max: N}")
		return
	}
	c := Collect{Max: DefaultCollectMax, Pos: nodePos(file, vn)}
	for j := 0; j+1 < len(vn.Content); j += 2 {
		tk, tv := vn.Content[j], vn.Content[j+1]
		switch tk.Text {
		case "within":
			c.Within = dur(tv, "collect within")
		case "quiet":
			c.Quiet = dur(tv, "collect quiet")
		case "max":
			n, ok := yaml11.Resolve(tv.Text).(int64)
			if !ok || n < 1 || n > 100000 || tv.Kind != yaml11.ScalarNode {
				l.errorf(file, tv, "collect max must be an integer from 1 to 100000")
				continue
			}
			c.Max = int(n)
		case "key":
			if s, ok := scalarString(tv); ok && s != "" {
				if rule.Options.Key != "" && rule.Options.Key != s {
					l.errorf(file, tv, "collect key differs from the rule's key option: give one")
					continue
				}
				rule.Options.Key, rule.Options.KeyPos = s, nodePos(file, tv)
			} else {
				l.errorf(file, tv, "collect key must be an expression")
			}
		default:
			l.errorf(file, tk, "unknown collect option %q (known: within, quiet, key, max)", tk.Text)
		}
	}
	if c.Within == 0 {
		l.errorf(file, vn, "collect needs within: the window, from the first event, after which the rule reacts once")
		return
	}
	if c.Quiet >= c.Within {
		l.errorf(file, vn, "collect quiet must be shorter than within")
		return
	}
	rule.Options.Collect = c
}

// retryOption reads a rule's retry: {attempts: N, backoff: DURATION, on:
// [failed, no_return]}.
func (l *loader) retryOption(file string, vn *yaml11.Node, rule *Rule, dur func(*yaml11.Node, string) time.Duration) {
	if vn.Kind != yaml11.MappingNode {
		l.errorf(file, vn, "retry must be a mapping {attempts: N, backoff: DURATION, on: [failed, no_return]}")
		return
	}
	r := Retry{Backoff: 10 * time.Second, OnFailed: true, Pos: nodePos(file, vn)}
	for j := 0; j+1 < len(vn.Content); j += 2 {
		tk, tv := vn.Content[j], vn.Content[j+1]
		switch tk.Text {
		case "attempts":
			c, ok := yaml11.Resolve(tv.Text).(int64)
			if !ok || c < 1 || c > 100 || tv.Kind != yaml11.ScalarNode {
				l.errorf(file, tv, "retry attempts must be an integer from 1 to 100: how many times a job runs again at most")
				continue
			}
			r.Attempts = int(c)
		case "backoff":
			r.Backoff = dur(tv, "retry backoff")
		case "on":
			r.OnFailed = false
			items := tv.Content
			if tv.Kind == yaml11.ScalarNode {
				items = []*yaml11.Node{tv}
			}
			for _, it := range items {
				switch it.Text {
				case "failed":
					r.OnFailed = true
				case "no_return":
					r.OnNoReturn = true
				default:
					l.errorf(file, it, "retry on %q: known are failed (the return says success false or a non-zero retcode) and no_return (no return within the job timeout)", it.Text)
				}
			}
		default:
			l.errorf(file, tk, "unknown retry option %q (known: attempts, backoff, on)", tk.Text)
		}
	}
	if r.Attempts == 0 {
		l.errorf(file, vn, "retry needs attempts")
		return
	}
	rule.Options.Retry = r
}

// throttleOption reads a rule's throttle: {count: N, per: DURATION, key: EXPR}.
func (l *loader) throttleOption(file string, vn *yaml11.Node, rule *Rule, dur func(*yaml11.Node, string) time.Duration) {
	if vn.Kind != yaml11.MappingNode {
		l.errorf(file, vn, "throttle must be a mapping {count: N, per: DURATION, key: EXPR}")
		return
	}
	for j := 0; j+1 < len(vn.Content); j += 2 {
		tk, tv := vn.Content[j], vn.Content[j+1]
		switch tk.Text {
		case "count":
			c, ok := yaml11.Resolve(tv.Text).(int64)
			if !ok || c < 1 || tv.Kind != yaml11.ScalarNode {
				l.errorf(file, tv, "throttle count must be a positive integer")
				continue
			}
			rule.Options.ThrottleCount = int(c)
		case "per":
			rule.Options.ThrottlePer = dur(tv, "throttle per")
		case "key":
			if s, ok := scalarString(tv); ok && s != "" {
				rule.Options.Key, rule.Options.KeyPos = s, nodePos(file, tv)
			} else {
				l.errorf(file, tv, "throttle key must be an expression")
			}
		default:
			l.errorf(file, tk, "unknown throttle option %q (known: count, per, key)", tk.Text)
		}
	}
	if rule.Options.ThrottleCount == 0 || rule.Options.ThrottlePer == 0 {
		l.errorf(file, vn, "throttle needs count and per")
	}
}

// duplicateRule reports whether a rule with the same tag glob and reaction
// files is already present in another file, which Salt's include merge
// drops. An identical one (options too) is dropped with a warning; one
// whose reactord options differ (a mapping-form rule beside a plain one,
// or two different when:, throttle or debounce) is a conflict, an error
// naming both positions: merging would silently keep the first's options.
func (l *loader) duplicateRule(cfg *Config, r Rule) bool {
	for _, o := range cfg.Rules {
		if o.Glob != r.Glob || len(o.SLS) != len(r.SLS) || o.Pos.File == r.Pos.File {
			continue
		}
		same := true
		for i := range o.SLS {
			if o.SLS[i].Ref != r.SLS[i].Ref {
				same = false
				break
			}
		}
		if !same {
			continue
		}
		if sameOptions(o.Options, r.Options) {
			l.warnings = append(l.warnings, &Error{Pos: r.Pos, Msg: fmt.Sprintf(
				"rule %q repeats the rule at %s (same tag glob, reaction files and options); Salt's merge keeps one, and so does reactord", r.Glob, o.Pos)})
			return true
		}
		l.errs = append(l.errs, &Error{Pos: r.Pos, Msg: fmt.Sprintf(
			"rule %q conflicts with the rule at %s: same tag glob and reaction files but different options (when, key, throttle, debounce, literal_target); Salt's merge would keep only the first — remove one, or give them different reaction files", r.Glob, o.Pos)})
		return true
	}
	return false
}

// sameOptions reports whether two rules say the same beyond Salt's form.
func sameOptions(a, b RuleOptions) bool {
	lt := func(p *bool) string {
		if p == nil {
			return "unset"
		}
		return fmt.Sprint(*p)
	}
	return a.When == b.When && a.Key == b.Key && a.ThrottleCount == b.ThrottleCount && a.ThrottlePer == b.ThrottlePer &&
		a.Debounce == b.Debounce && a.Guard == b.Guard && lt(a.LiteralTarget) == lt(b.LiteralTarget)
}

// reactorFile loads `reactor: /path` — a file holding the bare rule list.
func (l *loader) reactorFile(cfg *Config, file string, n *yaml11.Node, path string) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(file), path)
	}
	cfg.ReactorFile = path
	src, err := os.ReadFile(path)
	if err != nil {
		l.errorf(file, n, "reading the reactor map: %v", err)
		return
	}
	root, err := yaml11.Parse(src)
	if err != nil {
		l.errs = append(l.errs, yamlError(path, src, err))
		return
	}
	if root == nil {
		return
	}
	if root.Kind != yaml11.SequenceNode {
		l.warnf(path, root, "a reactor map file must hold the bare list of rules (no reactor: key); Salt matches nothing with it")
		return
	}
	l.ruleList(cfg, path, root)
}

func (l *loader) fileRoots(cfg *Config, file string, n *yaml11.Node) {
	if n.Kind != yaml11.MappingNode {
		l.errorf(file, n, "file_roots must be a mapping of saltenv to a list of directories")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		env, ok := scalarString(n.Content[i])
		if !ok {
			l.errorf(file, n.Content[i], "file_roots saltenv must be a string")
			continue
		}
		for _, dir := range l.stringList(file, n.Content[i+1], "file_roots."+env) {
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(filepath.Dir(file), dir)
			}
			if !contains(cfg.FileRoots[env], dir) {
				cfg.FileRoots[env] = append(cfg.FileRoots[env], dir)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (l *loader) settings(cfg *Config, file string, n *yaml11.Node) {
	if n.Kind != yaml11.MappingNode {
		l.errorf(file, n, "reactord must be a mapping of reactord settings")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		k, _ := scalarString(kn)
		str := func() string {
			s, ok := scalarString(vn)
			if !ok {
				l.errorf(file, vn, "reactord.%s must be a string", k)
			}
			return s
		}
		switch k {
		case "nats":
			cfg.Settings.NATS = str()
		case "driver":
			cfg.Settings.Driver = str()
			l.checkDriver(file, vn, cfg.Settings.Driver)
		case "data_dir":
			cfg.Settings.DataDir = str()
		case "log_level":
			s := str()
			if lv, ok := logLevels[strings.ToLower(s)]; ok {
				cfg.Settings.LogLevel = lv
			} else {
				l.errorf(file, vn, "reactord.log_level must be one of %s (Salt's levels; warn is warning), not %q", logLevelNames, s)
			}
		case "store":
			cfg.Settings.Store = str()
			if storeHasPassword(cfg.Settings.Store) {
				l.errorf(file, vn, "reactord.store holds a password in clear: put the URL in a file only reactord can read and give its path as store_file")
			}
		case "store_file":
			if s := str(); s != "" {
				if !filepath.IsAbs(s) {
					s = filepath.Join(filepath.Dir(file), s)
				}
				cfg.Settings.StoreFile = s
			}
		case "keep_jobs":
			s, ok := scalarString(vn)
			d, err := time.ParseDuration(s)
			if !ok || err != nil || d <= 0 {
				l.errorf(file, vn, "reactord.keep_jobs must be a positive duration such as 24h")
				continue
			}
			cfg.Settings.KeepJobs = d
		case "settle", "job_timeout":
			s, ok := scalarString(vn)
			d, err := time.ParseDuration(s)
			if !ok || err != nil || d <= 0 {
				l.errorf(file, vn, "reactord.%s must be a positive duration such as 5s", k)
				continue
			}
			if k == "settle" {
				cfg.Settings.Settle = d
			} else {
				cfg.Settings.JobTimeout = d
			}
		case "max_hops":
			v, ok := yaml11.Resolve(vn.Text).(int64)
			if vn.Kind != yaml11.ScalarNode || !ok || v < 1 {
				l.errorf(file, vn, "reactord.max_hops must be a positive integer")
				continue
			}
			cfg.Settings.MaxHops = int(v)
		case "workers":
			v, ok := yaml11.Resolve(vn.Text).(int64)
			if vn.Kind != yaml11.ScalarNode || !ok || v < 1 {
				l.errorf(file, vn, "reactord.workers must be a positive integer")
				continue
			}
			cfg.Settings.Workers = int(v)
		case "literal_target":
			b, ok := yaml11.Resolve(vn.Text).(bool)
			if vn.Kind != yaml11.ScalarNode || !ok {
				l.errorf(file, vn, "reactord.literal_target must be true or false")
				continue
			}
			cfg.Settings.LiteralTarget = b
		case "jinja", "renderer":
			l.renderer(cfg, file, k, vn)
		default:
			if !l.flagSetting(cfg, file, k, kn, vn) {
				l.errorf(file, kn, "%s", unknownSetting(kn.Text))
			}
		}
	}
}

// renderer reads renderer: (one of Renderers) or its older spelling
// jinja: (true is jinja, false gotmpl).
func (l *loader) renderer(cfg *Config, file, key string, vn *yaml11.Node) {
	if key == "jinja" {
		b, ok := yaml11.Resolve(vn.Text).(bool)
		if vn.Kind != yaml11.ScalarNode || !ok {
			l.errorf(file, vn, "reactord.jinja must be true or false (renderer: jinja says the same)")
			return
		}
		cfg.Settings.Renderer = RendererGotmpl
		if b {
			cfg.Settings.Renderer = RendererJinja
		}
		return
	}
	v, ok := scalarString(vn)
	if !ok || !slices.Contains(Renderers, v) {
		l.errorf(file, vn, "reactord.renderer must be one of %s", strings.Join(Renderers, ", "))
		return
	}
	cfg.Settings.Renderer = v
}

// resolveSLS turns each SLS reference into a local path pattern.
func (l *loader) resolveSLS(cfg *Config) {
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		for j := range r.SLS {
			s := &r.SLS[j]
			if rest, ok := strings.CutPrefix(s.Ref, "salt://"); ok {
				s.Pattern = cfg.SaltPath(rest)
				if s.Pattern == "" {
					l.warnings = append(l.warnings, &Error{Pos: s.Pos, Msg: fmt.Sprintf("%s is not in file_roots; Salt renders nothing for it", s.Ref)})
				}
				continue
			}
			p := s.Ref
			if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(s.Pos.File), p)
			}
			s.Pattern = p
		}
	}
}

// SaltPath resolves the part of a salt:// URL after the scheme
// (`path/file.sls?saltenv=env`) against file_roots, returning the first
// existing file or "".
func (c *Config) SaltPath(ref string) string {
	path, query, _ := strings.Cut(ref, "?")
	env := "base"
	if q, err := url.ParseQuery(query); err == nil && q.Get("saltenv") != "" {
		env = q.Get("saltenv")
	}
	for _, root := range c.FileRoots[env] {
		p := filepath.Join(root, filepath.FromSlash(path))
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}
