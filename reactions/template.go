package reactions

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"time"
	"unicode/utf8"

	"github.com/Masterminds/sprig/v3"

	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/jinja/py"
)

// valueKind says how a printed value reached the output: as raw data, or
// through an encoder that is safe by construction.
type valueKind uint8

const (
	rawValue    valueKind = iota // any other pipeline: data, never structure
	jsonValue                    // toJson, toRawJson, toPrettyJson
	quotedValue                  // quote: a Go-quoted string
	squoteValue                  // squote: a string in single quotes
)

// escapers maps the identifier appended to each output pipeline to the kind
// of value it records.
var escapers = map[string]valueKind{
	"__rd_raw":    rawValue,
	"__rd_json":   jsonValue,
	"__rd_quote":  quotedValue,
	"__rd_squote": squoteValue,
}

// encoderEscaper names, for each trusted encoder, the escaper that follows it.
var encoderEscaper = map[string]string{
	"quote":  "__rd_quote",
	"squote": "__rd_squote",
}

// jsonEncoders are the JSON encoders a template can end a pipeline with.
// Such a call is replaced by its recorder ("__rd_j_" + name), which keeps
// the value itself as well as the encoder's text: Salt reads the JSON it
// pastes as YAML, and the value decides what that gives (1.0 stays a
// float, 1e+16 is a string), not Go's spelling of it.
var jsonEncoders = func() map[string]func(any) (string, error) {
	fm := sprig.TxtFuncMap()
	out := map[string]func(any) (string, error){
		"jsonEncode":   py.JSONEncode,
		"tojsonEncode": py.ToJSON,
	}
	for _, name := range []string{"toJson", "toRawJson", "toPrettyJson"} {
		f := fm[name].(func(any) string)
		out[name] = func(v any) (string, error) { return f(v), nil }
	}
	return out
}()

// jsonRecorderPrefix starts the name of a JSON encoder's recorder.
const jsonRecorderPrefix = "__rd_j_"

// removedFuncs are sprig functions that reach outside the template (the
// reactor's environment and DNS: event data must not be able to read
// either), and those that cost seconds of CPU per call whatever the event
// (key and certificate generation, bcrypt, scrypt): one event calling them
// would hold up its lane.
var removedFuncs = []string{"env", "expandenv", "getHostByName",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
	"bcrypt", "htpasswd", "derivePassword"}

// sentinel marks where a printed value stands in rendered text. It is a run
// of ASCII letters, random per process, followed by the value's index and an
// underscore, so it is always part of one YAML scalar wherever it lands.
var sentinel = newSentinel()

func newSentinel() string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	out := make([]byte, 0, 16)
	out = append(out, "Rd"...)
	for _, c := range b {
		out = append(out, letters[int(c)%len(letters)])
	}
	return string(out)
}

// baseFuncs is the function map every reaction template sees: sprig's
// text/template functions without the ones that read the host, plus the
// escapers. The escapers here are placeholders; each pooled instance binds
// its own recorder.
var baseFuncs = func() template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, name := range removedFuncs {
		delete(fm, name)
	}
	for name := range escapers {
		fm[name] = func(args ...any) (string, error) { return "", errors.New("escaper called outside a render") }
	}
	for name := range jsonEncoders {
		fm[jsonRecorderPrefix+name] = func(args ...any) (string, error) { return "", errors.New("escaper called outside a render") }
	}
	fm[tickIdent] = func() (string, error) { return "", errors.New("step counter called outside a render") }
	// Bound the functions that build values of any size from a number, as
	// Jinja's sandbox bounds range(): event data may supply the number.
	until := fm["until"].(func(int) []int)
	fm["until"] = func(n int) ([]int, error) {
		if n > maxRange || n < -maxRange {
			return nil, fmt.Errorf("until %d: more than %d items", n, maxRange)
		}
		return until(n), nil
	}
	untilStep := fm["untilStep"].(func(int, int, int) []int)
	fm["untilStep"] = func(start, stop, step int) ([]int, error) {
		// In floats: stop-start overflows an int for far-apart bounds.
		if step == 0 || math.Abs((float64(stop)-float64(start))/float64(step)) > maxRange {
			return nil, fmt.Errorf("untilStep: more than %d items", maxRange)
		}
		return untilStep(start, stop, step), nil
	}
	fm["repeat"] = func(count int, s string) (string, error) {
		if err := boundedSize("repeat", count, len(s)); err != nil {
			return "", err
		}
		return strings.Repeat(s, count), nil
	}
	for _, name := range []string{"indent", "nindent"} {
		indent := fm[name].(func(int, string) string)
		fm[name] = func(spaces int, s string) (string, error) {
			if err := boundedSize(name, spaces, strings.Count(s, "\n")+1); err != nil {
				return "", err
			}
			return indent(spaces, s), nil
		}
	}
	for _, name := range []string{"randAlphaNum", "randAlpha", "randAscii", "randNumeric"} {
		random := fm[name].(func(int) string)
		fm[name] = func(count int) (string, error) {
			if err := boundedSize(name, count, 1); err != nil {
				return "", err
			}
			return random(count), nil
		}
	}
	randBytes := fm["randBytes"].(func(int) (string, error))
	fm["randBytes"] = func(count int) (string, error) {
		if err := boundedSize("randBytes", count, 2); err != nil {
			return "", err
		}
		return randBytes(count)
	}
	delete(fm, "seq") // a shell seq(1) clone with no bound on its output
	// Python/Jinja semantics, for files converted from Jinja, and Salt's
	// salt['fun'](...) at render time, which needs the render's session.
	maps.Copy(fm, py.Funcs())
	fm["saltFn"] = saltFn
	return fm
}()

// boundedSize refuses a count that would make fn build more than
// maxRepeat bytes, unit bytes each, before it allocates them (a count
// from event data could ask for gigabytes: Go's out-of-memory error ends
// the process, and the event would end the next one too).
func boundedSize(fn string, count, unit int) error {
	if count < 0 || (unit > 0 && count > maxRepeat/unit) {
		return fmt.Errorf("%s: %d would build more than %d bytes", fn, count, maxRepeat)
	}
	return nil
}

// Bounds on template functions driven by numbers.
const (
	maxRange  = 100000
	maxRepeat = 1 << 20
)

// recorded is one value printed by a template action.
type recorded struct {
	v    any
	text string
	kind valueKind
	// enc is set for a JSON encoder's value: v is what was encoded.
	enc jsonEnc
}

// jsonEnc says how a JSON encoder wrote an object's keys.
type jsonEnc uint8

const (
	encNone    jsonEnc = iota
	encSorted          // toJson, jsonEncode: keys sorted (Salt's |json)
	encInOrder         // tojsonEncode: keys in the dict's order (|tojson)
)

// recorder collects the values printed during one execution, and the
// rendered text, within the execution's Limits.
type recorder struct {
	vals []recorded
	buf  []byte
	segs []outSeg // where each write landed in out, for templatePos

	name    string
	textPos map[*byte]textPos
	out     bytes.Buffer
	lim     Limits
	bytes   int // the rendered text as Salt would see it, values printed
	steps   int
	start   time.Time
}

// reset prepares the recorder for one execution.
func (r *recorder) reset(lim Limits) {
	r.vals = r.vals[:0]
	r.segs = r.segs[:0]
	r.out.Reset()
	r.lim = lim
	r.bytes = 0
	r.steps = 0
	r.start = time.Now()
}

// Write appends template text (and placeholders) to the rendered text,
// refusing what would cross the Bytes or YAMLBytes bound. The error names
// the text node being written.
func (r *recorder) Write(p []byte) (int, error) {
	var le *LimitError
	switch {
	case r.out.Len()+len(p) > r.lim.YAMLBytes:
		le = &LimitError{What: "YAMLBytes", Limit: r.lim.YAMLBytes}
	case r.bytes+len(p) > r.lim.Bytes:
		le = &LimitError{What: "Bytes", Limit: r.lim.Bytes}
	default:
		r.bytes += len(p)
		if len(p) > 0 {
			r.segs = append(r.segs, outSeg{off: r.out.Len(), src: &p[0]})
		}
		return r.out.Write(p)
	}
	pos := textPos{1, 1}
	if len(p) > 0 {
		if tp, ok := r.textPos[&p[0]]; ok {
			pos = tp
		}
	}
	return 0, &PosError{Pos: position.Pos{File: r.name, Line: pos.line, Col: pos.col}, Msg: le.Error(), Err: le}
}

// tick counts one loop iteration or template call.
func (r *recorder) tick() (string, error) {
	r.steps++
	if r.steps > r.lim.Steps {
		return "", &LimitError{What: "Steps", Limit: r.lim.Steps}
	}
	if r.steps%64 == 0 && time.Since(r.start) > r.lim.Time {
		return "", &LimitError{What: "Time", Limit: int(r.lim.Time)}
	}
	return "", nil
}

// recordJSON records the value a JSON encoder prints, and its text.
func (r *recorder) recordJSON(name string, args []any) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("wrong number of args for %s: want 1 got %d", name, len(args))
	}
	text, err := jsonEncoders[name](args[0])
	if err != nil {
		return "", err
	}
	enc := encSorted
	if name == "tojsonEncode" {
		enc = encInOrder
	}
	return r.add(recorded{v: args[0], text: text, kind: jsonValue, enc: enc})
}

func (r *recorder) record(kind valueKind, args []any) (string, error) {
	var v any
	switch len(args) {
	case 0:
		v = ""
	case 1:
		v = args[0]
	default:
		v = fmt.Sprint(args...)
	}
	rv := recorded{v: v, kind: kind}
	if kind != rawValue {
		rv.text = py.Text(v)
	}
	return r.add(rv)
}

// add records one printed value and returns its placeholder.
func (r *recorder) add(rv recorded) (string, error) {
	idx := len(r.vals)
	if idx >= r.lim.Values {
		return "", &LimitError{What: "Values", Limit: r.lim.Values}
	}
	var size int
	if rv.kind != rawValue {
		size = len(rv.text)
	} else {
		size = printedSize(rv.v, r.lim.Bytes-r.bytes)
	}
	var ph string
	if idx < len(placeholders) {
		ph = placeholders[idx]
	} else {
		r.buf = append(r.buf[:0], sentinel...)
		r.buf = strconv.AppendInt(r.buf, int64(idx), 10)
		r.buf = append(r.buf, '_')
		ph = string(r.buf)
	}
	// The placeholder is written next; it counts as part of the output.
	if r.out.Len()+len(ph) > r.lim.YAMLBytes {
		return "", &LimitError{What: "YAMLBytes", Limit: r.lim.YAMLBytes}
	}
	if r.bytes+size+len(ph) > r.lim.Bytes {
		return "", &LimitError{What: "Bytes", Limit: r.lim.Bytes}
	}
	r.bytes += size
	r.vals = append(r.vals, rv)
	return ph, nil
}

// placeholders are the first placeholder strings, built once.
var placeholders = func() []string {
	out := make([]string, 256)
	for i := range out {
		out[i] = sentinel + strconv.Itoa(i) + "_"
	}
	return out
}()

// instance is one executable copy of a template bound to its own recorder.
type instance struct {
	t   *template.Template
	rec *recorder
}

// Template is a parsed reaction template whose every output is escaped. It is
// safe for concurrent use.
type Template struct {
	name    string
	actions int // printing actions; 0 means the output never depends on the event

	base    *template.Template
	textPos map[*byte]textPos
	pool    sync.Pool
}

var sentinelInSource = regexp.MustCompile(`Rd[A-Za-z]{12}[0-9]+_`)

// ParseTemplate parses src as a Go template named name (the file path, used
// in error messages), and rewrites every action that prints so its value is
// recorded and replaced by a placeholder. Errors are positioned
// "name:line:col: message".
func ParseTemplate(name, src string) (*Template, error) {
	if strings.Contains(src, sentinel) || sentinelInSource.MatchString(src) {
		return nil, fmt.Errorf("%s:1:1: the file contains reactord's reserved placeholder text", name)
	}
	t, err := template.New(name).Funcs(baseFuncs).Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, unclosedBlockError(src, templateError(name, err))
	}
	actions := 0
	var trees []*parse.Tree
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Tree.Root == nil {
			continue
		}
		trees = append(trees, tt.Tree)
		actions += escapeList(tt.Tree, tt.Tree.Root)
		if hasControl(tt.Tree.Root) {
			actions++
		}
		addTicks(tt.Tree)
	}
	tpl := &Template{name: name, base: t, actions: actions, textPos: textPositions(trees)}
	tpl.pool.New = func() any { return tpl.newInstance() }
	return tpl, nil
}

func (t *Template) newInstance() *instance {
	c, err := t.base.Clone()
	if err != nil {
		// Clone only fails after the template was executed, which the base
		// never is.
		panic(fmt.Sprintf("cloning template %s: %v", t.name, err))
	}
	rec := &recorder{name: t.name, textPos: t.textPos}
	fm := template.FuncMap{tickIdent: rec.tick}
	for name, kind := range escapers {
		kind := kind
		fm[name] = func(args ...any) (string, error) { return rec.record(kind, args) }
	}
	for name := range jsonEncoders {
		name := name
		fm[jsonRecorderPrefix+name] = func(args ...any) (string, error) { return rec.recordJSON(name, args) }
	}
	c.Funcs(fm)
	return &instance{t: c, rec: rec}
}

// execute runs the template for one event within lim and calls use with
// the rendered text (placeholders in place of printed values) and the
// recorded values. Neither may be retained after use returns.
func (t *Template) execute(data any, lim Limits, use func(text []byte, vals []recorded) error) error {
	in := t.pool.Get().(*instance)
	defer t.pool.Put(in)
	rec := in.rec
	rec.reset(lim)
	defer func() {
		clear(rec.vals)
		clear(rec.segs)
		// A pooled instance does not keep a large render's memory.
		if rec.out.Cap() > maxPooledBuffer {
			rec.out = bytes.Buffer{}
		}
		if cap(rec.vals) > maxPooledValues {
			rec.vals = nil
		}
		if cap(rec.segs) > maxPooledValues {
			rec.segs = nil
		}
	}()
	if err := in.t.Execute(rec, data); err != nil {
		var pe *PosError
		if errors.As(err, &pe) && pe.File == t.name {
			return pe // a bound crossed while writing text
		}
		return templateError(t.name, err)
	}
	return rec.fromRendered(use(rec.out.Bytes(), rec.vals))
}

// fromRendered adds to an error positioned in the rendered text the
// template line that wrote it.
func (r *recorder) fromRendered(err error) error {
	var pe *PosError
	if errors.As(err, &pe) && rendered(pe.Err) {
		if tp, ok := r.templatePos(pe.Line, pe.Col); ok {
			return &PosError{Pos: position.Pos{File: pe.File, Line: pe.Line, Col: pe.Col}, Err: pe.Err,
				Msg: fmt.Sprintf("%s, from line %d of the template)", strings.TrimSuffix(pe.Msg, ")"), tp.line)}
		}
	}
	return err
}

// executeFixed renders, without an event, a template whose rendered text
// is the same for every event: its top level holds only text, comments
// and actions (no if, range, with or template call), so each printed
// value lands where its action stands, as its placeholder, whatever it
// is. It calls use with that text, as execute does, and reports false
// without calling use when the text may depend on the event.
func (t *Template) executeFixed(lim Limits, use func(text []byte) error) (bool, error) {
	if t.base.Tree == nil || t.base.Tree.Root == nil {
		return false, nil
	}
	nodes := t.base.Tree.Root.Nodes
	for _, n := range nodes {
		switch n.(type) {
		case *parse.TextNode, *parse.CommentNode, *parse.ActionNode:
		default:
			return false, nil
		}
	}
	rec := &recorder{name: t.name, textPos: t.textPos}
	rec.reset(lim)
	for _, n := range nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			// The node's own bytes, as Execute writes them: templatePos
			// finds the template line from their address.
			if _, err := rec.Write(n.Text); err != nil {
				return true, err
			}
		case *parse.ActionNode:
			if len(n.Pipe.Decl) > 0 {
				continue // {{ $x := ... }} prints nothing
			}
			ph, err := rec.add(recorded{kind: quotedValue})
			if err != nil {
				return true, templateError(t.name, fmt.Errorf("template: %s:%d: %w", t.name, n.Line, err))
			}
			if _, err := rec.Write([]byte(ph)); err != nil {
				return true, err
			}
		}
	}
	return true, rec.fromRendered(use(rec.out.Bytes()))
}

// outSeg is one write to the rendered text: its offset there, and its first
// byte (the template's text, found in textPos, or a printed placeholder).
type outSeg struct {
	off int
	src *byte
}

// templatePos returns the template position of the rendered text's line
// and character column: in template text, exactly; in a printed value, the
// action that printed it (where the text before it ends).
func (r *recorder) templatePos(line, col int) (textPos, bool) {
	out := r.out.Bytes()
	off, l, c := 0, 1, 1
	for off < len(out) && (l < line || l == line && c < col) {
		_, w := utf8.DecodeRune(out[off:])
		if out[off] == '\n' {
			if l == line {
				break
			}
			l, c = l+1, 1
		} else {
			c++
		}
		off += w
	}
	i := sort.Search(len(r.segs), func(i int) bool { return r.segs[i].off > off }) - 1
	if i < 0 {
		return textPos{}, false
	}
	// A printed value: start from the end of the text written before it.
	target := off
	for ; i >= 0; i-- {
		if _, ok := r.textPos[r.segs[i].src]; ok {
			break
		}
		target = r.segs[i].off
	}
	if i < 0 {
		return textPos{}, false
	}
	pos := r.textPos[r.segs[i].src]
	for j := r.segs[i].off; j < target; {
		_, w := utf8.DecodeRune(out[j:])
		if out[j] == '\n' {
			pos.line, pos.col = pos.line+1, 1
		} else {
			pos.col++
		}
		j += w
	}
	return pos, true
}

// maxPooledBuffer and maxPooledValues bound the output buffer and the
// value list a pooled instance keeps between renders.
const (
	maxPooledBuffer = 64 << 10
	maxPooledValues = 4096
)

// hasControl reports whether a tree holds anything but text and comments.
func hasControl(n *parse.ListNode) bool {
	for _, c := range n.Nodes {
		switch c.(type) {
		case *parse.TextNode, *parse.CommentNode:
		default:
			return true
		}
	}
	return false
}

// escapeList appends an escaper to every printing action under n and
// returns how many it rewrote.
func escapeList(tree *parse.Tree, n parse.Node) int {
	count := 0
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return 0
		}
		for _, c := range n.Nodes {
			count += escapeList(tree, c)
		}
	case *parse.ActionNode:
		if len(n.Pipe.Decl) > 0 {
			return 0 // {{ $x := ... }} prints nothing
		}
		count++
		esc := "__rd_raw"
		if cmds := n.Pipe.Cmds; len(cmds) > 0 {
			last := cmds[len(cmds)-1]
			if id, ok := last.Args[0].(*parse.IdentifierNode); ok {
				if _, ok := jsonEncoders[id.Ident]; ok {
					// The encoder's recorder takes its place.
					last.Args[0] = parse.NewIdentifier(jsonRecorderPrefix + id.Ident).SetTree(tree).SetPos(id.Pos)
					return count
				}
				if e, ok := encoderEscaper[id.Ident]; ok {
					esc = e
				}
			}
		}
		ident := parse.NewIdentifier(esc).SetTree(tree).SetPos(n.Pos)
		n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{ident}})
	case *parse.IfNode:
		count += escapeList(tree, n.List) + escapeList(tree, n.ElseList)
	case *parse.RangeNode:
		count += escapeList(tree, n.List) + escapeList(tree, n.ElseList)
	case *parse.WithNode:
		count += escapeList(tree, n.List) + escapeList(tree, n.ElseList)
	}
	return count
}

var tmplErrRe = regexp.MustCompile(`^template: ([^:]*(?::[^0-9][^:]*)*):(\d+)(?::(\d+))?: (.*)$`)

// templateError turns text/template's "template: NAME:LINE:COL: msg" into
// "NAME:LINE:COL: msg".
func templateError(name string, err error) error {
	msg := err.Error()
	var le *LimitError
	if errors.As(err, &le) {
		// A bound crossed in an action: keep its position, not the
		// action's rewritten pipeline.
		pe := templateError(name, errors.New(msg)).(*PosError)
		pe.Msg, pe.Err = le.Error(), err
		return pe
	}
	prefix := "template: " + name + ":"
	if rest, ok := strings.CutPrefix(msg, prefix); ok {
		line, rest2, _ := strings.Cut(rest, ":")
		col := "1"
		if c, r3, ok := strings.Cut(rest2, ":"); ok {
			if _, err := strconv.Atoi(c); err == nil {
				col, rest2 = c, r3
			}
		}
		rest2 = strings.TrimSpace(rest2)
		rest2 = missingKeyHint(stripEscaperNames(rest2))
		return &PosError{Pos: position.Pos{File: name, Line: atoi(line), Col: atoi(col)}, Msg: rest2, Err: err}
	}
	if m := tmplErrRe.FindStringSubmatch(msg); m != nil {
		col := m[3]
		if col == "" {
			col = "1"
		}
		return &PosError{Pos: position.Pos{File: name, Line: atoi(m[2]), Col: atoi(col)}, Msg: missingKeyHint(stripEscaperNames(m[4])), Err: err}
	}
	return &PosError{Pos: position.Pos{File: name, Line: 1, Col: 1}, Msg: msg, Err: err}
}

// stripEscaperNames hides the rewritten pipeline's escaper from messages such
// as `executing "x" at <__rd_raw>`.
func stripEscaperNames(s string) string {
	for name := range escapers {
		s = strings.ReplaceAll(s, " | "+name, "")
	}
	return strings.ReplaceAll(s, jsonRecorderPrefix, "")
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// PosError is an error at a position in a file.
type PosError = position.Error

// inRendered marks an error positioned in the rendered text of a
// template, which Execute maps back to the template's line.
type inRendered struct{ error }

func (e inRendered) Unwrap() error { return e.error }

// rendered reports whether err is positioned in a template's rendered
// text.
func rendered(err error) bool {
	var r inRendered
	return errors.As(err, &r)
}
