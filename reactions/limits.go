package reactions

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template/parse"
	"time"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/jinja/py"
)

// Limits bound what rendering one reaction file for one event may produce.
// A template that loops over event data can otherwise turn a 1 MB event
// into gigabytes of text, YAML nodes and reactions. Each bound is checked
// while the template runs, so the render stops as soon as it is crossed and
// memory never grows past it; the file then fails with a *PosError naming
// the file, line and column where rendering stopped (the action or text
// that crossed it), which wraps a *LimitError. Like any render error, it
// drops that file for that event only.
//
// A zero field means its default (DefaultLimits). A file takes its bounds
// when it is compiled (ParseFileWith, Library.Limits); the daemon runs
// with the defaults.
type Limits struct {
	// Bytes bounds the rendered text as Salt would see it: the template's
	// own text plus the printed form of every value (a map or list printed
	// raw counts at the approximate size of its repr). YAML aliases that
	// repeat printed values count each repetition.
	Bytes int
	// Values bounds the number of values the template prints.
	Values int
	// YAMLBytes bounds the text the YAML parser reads: the template's own
	// text with a short placeholder (about 17 bytes) for each printed
	// value. Parsing YAML takes up to about 100 bytes of memory per byte
	// of text, so this bound is tighter than Bytes.
	YAMLBytes int
	// Steps bounds the loop iterations (range) and template calls of one
	// render, so a loop that prints nothing, a range over a number taken
	// from event data or a recursive template cannot run for ever.
	Steps int
	// Time bounds how long one render runs, checked at each loop iteration
	// and template call (a single function call is not interrupted).
	Time time.Duration
}

// DefaultLimits are the bounds of a file compiled without any (ParseFile),
// and of each zero field of Limits.
var DefaultLimits = Limits{
	Bytes:     4 << 20,
	Values:    25000,
	YAMLBytes: 512 << 10,
	Steps:     1000000,
	Time:      10 * time.Second,
}

// withDefaults is l with each zero field its default.
func (l Limits) withDefaults() Limits {
	if l.Bytes <= 0 {
		l.Bytes = DefaultLimits.Bytes
	}
	if l.Values <= 0 {
		l.Values = DefaultLimits.Values
	}
	if l.YAMLBytes <= 0 {
		l.YAMLBytes = DefaultLimits.YAMLBytes
	}
	if l.Steps <= 0 {
		l.Steps = DefaultLimits.Steps
	}
	if l.Time <= 0 {
		l.Time = DefaultLimits.Time
	}
	return l
}

// LimitError reports that a render crossed one of its Limits.
type LimitError struct {
	// What names the bound: "Bytes", "Values", "YAMLBytes", "Steps",
	// "Time", or "Aliases" (Bytes, crossed by YAML aliases repeating
	// printed values).
	What string
	// Limit is the bound's value (nanoseconds for Time).
	Limit int
}

func (e *LimitError) Error() string {
	var what string
	switch e.What {
	case "Bytes":
		what = fmt.Sprintf("the rendered output exceeds %d bytes", e.Limit)
	case "Values":
		what = fmt.Sprintf("the template prints more than %d values", e.Limit)
	case "YAMLBytes":
		what = fmt.Sprintf("the rendered YAML text exceeds %d bytes", e.Limit)
	case "Steps":
		what = fmt.Sprintf("the template runs more than %d loop iterations and template calls", e.Limit)
	case "Time":
		what = fmt.Sprintf("the template ran longer than %v", time.Duration(e.Limit))
	case "Aliases":
		what = fmt.Sprintf("the printed values, repeated by YAML aliases, exceed %d bytes", e.Limit)
	default:
		what = fmt.Sprintf("a render limit (%d) was crossed", e.Limit)
	}
	field := e.What
	if field == "Aliases" {
		field = "Bytes"
	}
	return fmt.Sprintf("rendering stopped: %s (reactord's bound on one reaction file, reactions.Limits.%s)", what, field)
}

// textPos is the position of a text node of a template.
type textPos struct{ line, col int }

// textPositions maps the first byte of every text node of t's trees to its
// position. text/template writes a text node's bytes as they are in the
// tree, so a write that crosses a bound can be placed in the file.
func textPositions(trees []*parse.Tree) map[*byte]textPos {
	out := map[*byte]textPos{}
	var walk func(tree *parse.Tree, n parse.Node)
	walk = func(tree *parse.Tree, n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(tree, c)
			}
		case *parse.TextNode:
			if len(n.Text) > 0 {
				loc, _ := tree.ErrorContext(n)
				out[&n.Text[0]] = parseLocation(loc)
			}
		case *parse.IfNode:
			walk(tree, n.List)
			walk(tree, n.ElseList)
		case *parse.RangeNode:
			walk(tree, n.List)
			walk(tree, n.ElseList)
		case *parse.WithNode:
			walk(tree, n.List)
			walk(tree, n.ElseList)
		}
	}
	for _, tree := range trees {
		if tree != nil && tree.Root != nil {
			walk(tree, tree.Root)
		}
	}
	return out
}

// parseLocation reads "name:line:col" as text/template spells it.
func parseLocation(loc string) textPos {
	i := strings.LastIndexByte(loc, ':')
	if i < 0 {
		return textPos{1, 1}
	}
	col := atoi(loc[i+1:])
	rest := loc[:i]
	j := strings.LastIndexByte(rest, ':')
	if j < 0 {
		return textPos{1, col}
	}
	return textPos{atoi(rest[j+1:]), col}
}

// tickIdent names the function called at the start of every loop body and
// template, which counts render steps.
const tickIdent = "__rd_tick"

// addTicks puts a call of the step counter, which prints nothing, at the
// start of every range body and every template of tree.
func addTicks(tree *parse.Tree) {
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.IfNode:
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.List)
			walk(n.ElseList)
			if n.List != nil {
				n.List.Nodes = append([]parse.Node{tickNode(tree, n.Pos, n.Line)}, n.List.Nodes...)
			}
		}
	}
	walk(tree.Root)
	tree.Root.Nodes = append([]parse.Node{tickNode(tree, tree.Root.Pos, 1)}, tree.Root.Nodes...)
}

// tickNode is {{ $__rd_tick := __rd_tick }} at pos: an action that prints
// nothing.
func tickNode(tree *parse.Tree, pos parse.Pos, line int) *parse.ActionNode {
	ident := parse.NewIdentifier(tickIdent).SetTree(tree).SetPos(pos)
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Line: line, Pipe: &parse.PipeNode{
		NodeType: parse.NodePipe, Pos: pos, Line: line,
		Decl: []*parse.VariableNode{{NodeType: parse.NodeVariable, Pos: pos, Ident: []string{"$" + tickIdent}}},
		Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{ident}}},
	}}
}

// printedSize is about how many bytes v takes once printed (a map or list
// as Python's repr); it stops counting once the size exceeds budget.
func printedSize(v any, budget int) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case nil:
		return 4
	case bool:
		return 5
	case int64:
		return len(strconv.FormatInt(x, 10))
	case int:
		return len(strconv.Itoa(x))
	case *event.Map:
		n := 2
		for i := 0; i < x.Len() && n <= budget; i++ {
			k, e := x.At(i)
			n += len(k) + 6 + reprSize(e, budget-n)
		}
		return n
	case []any:
		n := 2
		for i := 0; i < len(x) && n <= budget; i++ {
			n += 2 + reprSize(x[i], budget-n)
		}
		return n
	case map[string]any:
		n := 2
		for k, e := range x {
			if n > budget {
				break
			}
			n += len(k) + 6 + reprSize(e, budget-n)
		}
		return n
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		n := 2
		for i := 0; i < rv.Len() && n <= budget; i++ {
			n += 2 + reprSize(rv.Index(i).Interface(), budget-n)
		}
		return n
	case reflect.Map:
		n := 2
		it := rv.MapRange()
		for n <= budget && it.Next() {
			n += 6 + reprSize(it.Key().Interface(), budget-n) + reprSize(it.Value().Interface(), budget-n)
		}
		return n
	}
	return len(py.Text(v))
}

// reprSize is printedSize of a value inside a printed structure, where
// strings are quoted.
func reprSize(v any, budget int) int {
	if s, ok := v.(string); ok {
		return len(s) + 2
	}
	return printedSize(v, budget)
}
