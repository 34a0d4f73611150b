package reactions

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/jinja/py"
)

// printedTarget is a tgt argument of a reaction whose value holds values
// the template printed (from event data).
type printedTarget struct {
	// item is the argument mapping that sets tgt; the last mapping of a
	// reaction type to set it wins, as in Salt's compiler.
	item *event.Map
	// printed are the printed values, as they land in the target: the text
	// of each printed scalar, each item of a list inserted with toJson.
	printed   []string
	line, col int
}

// noteTargets records, for CheckLiteralTarget, the tgt arguments of one
// argument list (list, materialized as value) that hold printed values.
func (m *materializer) noteTargets(list *pnode, value any) {
	items, ok := value.([]any)
	if list.kind != pSeq || !ok || len(items) != len(list.content) {
		return
	}
	for j, item := range list.content {
		am, ok := items[j].(*event.Map)
		if item.kind != pMap || !ok {
			continue
		}
		for k := 0; k+1 < len(item.content); k += 2 {
			kn, vn := item.content[k], item.content[k+1]
			if kn.kind != pScalar || kn.fromData() {
				continue // argument names from data are refused by checkArgKeys
			}
			if key, _ := kn.constant.(string); key != "tgt" {
				continue
			}
			var printed []string
			m.printedStrings(vn, &printed)
			if len(printed) > 0 {
				m.targets = append(m.targets, printedTarget{item: am, printed: printed, line: vn.line, col: max(vn.col, 1)})
			}
		}
	}
}

// printedStrings appends the printed values found under n.
func (m *materializer) printedStrings(n *pnode, out *[]string) {
	if n.kind != pScalar {
		for _, c := range n.content {
			m.printedStrings(c, out)
		}
		return
	}
	for _, ref := range n.refs {
		*out = append(*out, m.printedOf(ref)...)
	}
}

// printedOf returns what one printed value puts into a target.
func (m *materializer) printedOf(ref int) []string {
	if ref < 0 || ref >= len(m.vals) {
		return nil
	}
	r := m.vals[ref]
	switch r.kind {
	case rawValue:
		return []string{py.Text(r.v)}
	case jsonValue:
		v, err := decodeOrderedJSON(r.text)
		if err != nil {
			break
		}
		switch x := v.(type) {
		case string:
			return []string{x}
		case []any:
			out := make([]string, len(x))
			for i, e := range x {
				out[i] = py.Str(e)
			}
			return out
		}
	case quotedValue:
		if s, err := strconv.Unquote(r.text); err == nil {
			return []string{s}
		}
	case squoteValue:
		if len(r.text) >= 2 {
			return []string{r.text[1 : len(r.text)-1]}
		}
	}
	return []string{r.text}
}

// TargetError is a reaction refused by a rule's literal_target option: a
// value printed from event data into its tgt holds characters that would
// widen the target beyond the minion it names.
type TargetError struct {
	// Pos locates the tgt value in the rendered file.
	position.Pos
	// ID is the reaction ID and Type its reaction type (local, ...).
	ID, Type string
	// Value is the printed value; Tgt is the whole target it is part of,
	// TgtType its tgt_type ("" for Salt's default, glob).
	Value, Tgt, TgtType string
	// Reason says which character or word widens the target.
	Reason string
}

func (e *TargetError) Error() string {
	tt := e.TgtType
	if tt == "" {
		tt = "glob"
	}
	return fmt.Sprintf("%s: reaction %q refused (literal_target): the value %q printed from event data into its %s target %q (tgt_type %s) would widen it: %s; "+
		"print only a minion id there, use tgt_type: list, or check the id in the rule's when: (data.id matches \"^[A-Za-z0-9._-]+$\")",
		e.Pos, e.ID, e.Value, e.Type, e.Tgt, tt, e.Reason)
}

// CheckLiteralTarget returns a *TargetError when a value the template
// printed into one of r's tgt arguments (tgt: {{ .data.id }}) holds
// characters that widen a Salt target: glob `*?[]`, compound and range
// syntax (`@`, whitespace, the words and/or/not, `%`, `(`, `)`, `^`), `,`
// in a string target (a list), regular expression syntax when tgt_type is
// pcre, `/` when it is ipcidr. Text written in the reaction file itself
// (tgt: '*', tgt: 'G@os:{{ .data.os }}' around the printed part) is the
// author's and is not checked. It returns nil when every printed part of
// every tgt is a literal name.
func (r *Reaction) CheckLiteralTarget() error {
	if len(r.targets) == 0 || r.Body == nil {
		return nil
	}
	for _, typ := range r.Body.Keys() {
		if strings.HasPrefix(typ, "_") {
			continue
		}
		v, _ := r.Body.Get(typ)
		list, _ := v.([]any)
		var (
			tgt      *printedTarget
			tgtValue any
			tgtType  string
		)
		for _, a := range list {
			am, ok := a.(*event.Map)
			if !ok {
				continue
			}
			if tv, ok := am.Get("tgt"); ok {
				tgtValue, tgt = tv, r.printedTarget(am)
			}
			if tv, ok := am.Get("tgt_type"); ok {
				tgtType = py.Str(tv)
			}
		}
		if tgt == nil {
			continue
		}
		_, isList := tgtValue.([]any)
		for _, p := range tgt.printed {
			if why := widens(p, tgtType, !isList); why != "" {
				return &TargetError{Pos: position.Pos{File: r.File, Line: tgt.line, Col: tgt.col}, ID: py.Str(r.ID), Type: typ,
					Value: p, Tgt: py.Str(tgtValue), TgtType: tgtType, Reason: why}
			}
		}
	}
	return nil
}

// printedTarget returns the printed tgt set by the argument mapping am.
func (r *Reaction) printedTarget(am *event.Map) *printedTarget {
	for i := range r.targets {
		if r.targets[i].item == am {
			return &r.targets[i]
		}
	}
	return nil
}

// widens says why s, printed into a target of type tgtType (a string
// target when str), would make it match more than the minion it names, or
// returns "".
func widens(s, tgtType string, str bool) string {
	tgtType = strings.ToLower(strings.TrimSpace(tgtType))
	for _, c := range s {
		switch {
		case c == '*' || c == '?' || c == '[' || c == ']':
			return fmt.Sprintf("%q is glob syntax", c)
		case c == '@':
			return "'@' is compound syntax (G@, L@, E@, ...)"
		case unicode.IsSpace(c):
			return "whitespace joins compound expressions (and, or, not)"
		case c == '%':
			return "'%' is range syntax"
		case c == '(' || c == ')' || c == '^':
			return fmt.Sprintf("%q is compound or range syntax", c)
		case c == ',' && str:
			return "',' separates the names of a list target"
		case tgtType == "pcre" && strings.ContainsRune(`.+$|{}\`, c):
			return fmt.Sprintf("%q is regular expression syntax in a pcre target", c)
		case tgtType == "ipcidr" && c == '/':
			return "'/' sets a network prefix in an ipcidr target"
		}
	}
	switch strings.ToLower(s) {
	case "and", "or", "not":
		return fmt.Sprintf("%q is a compound operator", s)
	}
	return ""
}
