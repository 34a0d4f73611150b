// Package schemas holds reactord's JSON Schemas (draft 2020-12) and checks
// decoded JSON values against them.
//
// Four schemas are embedded, each named by its file name:
//
//   - [ReactorConfig] describes a reactor configuration file (a Salt master
//     config or master.d fragment with reactord's own section);
//   - [ReactionFile] describes a rendered reaction SLS file (Salt's high data);
//   - [LowChunk] describes one compiled low chunk as `reactord render` prints it;
//   - [Event] describes the {"tag", "data"} event envelope.
//
// [Source] returns a schema's text, so tools can print or publish it.
// [Validate] and [Check] validate a value that encoding/json decoded (with
// UseNumber) or that a YAML decoder produced, and report every violation
// with the JSON pointer of the offending value.
//
// A subschema may carry an "x-message" annotation: a mapping from a keyword
// ("type", "maxProperties", "not", ...) to the message shown to the operator
// when that keyword fails there. Validators that ignore it still see a
// standard schema.
package schemas

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed *.json
var files embed.FS

// Name identifies one embedded schema; it is the schema's file name.
type Name string

// The embedded schemas.
const (
	// ReactorConfig is the schema of a reactor configuration file: Salt's
	// reactor, file_roots and reactord's own settings.
	ReactorConfig Name = "reactor-config.json"
	// ReactionFile is the schema of a rendered reaction file: reaction IDs
	// mapped to reaction bodies.
	ReactionFile Name = "reaction-file.json"
	// LowChunk is the schema of one compiled low chunk.
	LowChunk Name = "low-chunk.json"
	// Event is the schema of an event envelope {"tag", "data"}.
	Event Name = "event.json"
)

// baseURL prefixes every schema's $id.
const baseURL = "https://reactord.dev/schemas/"

var allNames = []Name{ReactorConfig, ReactionFile, LowChunk, Event}

// Names returns the names of all embedded schemas, in a fixed order.
func Names() []Name {
	return slices.Clone(allNames)
}

// URL returns the $id of the named schema, e.g.
// https://reactord.dev/schemas/event.json.
func (n Name) URL() string {
	return baseURL + string(n)
}

// Source returns the raw bytes of the named schema, as embedded.
func Source(name Name) ([]byte, error) {
	if !slices.Contains(allNames, name) {
		return nil, unknownName(name)
	}
	return files.ReadFile(string(name))
}

func unknownName(name Name) error {
	known := make([]string, len(allNames))
	for i, n := range allNames {
		known[i] = string(n)
	}
	return fmt.Errorf("unknown schema %q (known: %s)", name, strings.Join(known, ", "))
}

// Violation is one way in which a value breaks a schema.
type Violation struct {
	// Pointer is the RFC 6901 JSON pointer of the offending value, such as
	// "/reactor/2"; the empty string designates the whole value.
	Pointer string
	// Message says what is wrong, for a human.
	Message string
}

// String formats the violation as "pointer: message", writing the whole
// value's empty pointer as "(root)".
func (v Violation) String() string {
	p := v.Pointer
	if p == "" {
		p = "(root)"
	}
	return p + ": " + v.Message
}

// ValidationError is the error [Validate] returns for a value that violates
// a schema. It lists every violation found.
type ValidationError struct {
	// Schema is the schema that was violated.
	Schema Name
	// Violations lists the violations, sorted by pointer.
	Violations []Violation
}

// Error returns one "pointer: message" line per violation.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		lines[i] = v.String()
	}
	return strings.Join(lines, "\n")
}

// Validate checks a decoded JSON value against the named schema. It returns
// nil if the value is valid, a *[ValidationError] listing every violation if
// it is not, and another error if the name is unknown or the embedded schema
// cannot be compiled.
//
// The value may be built from map[string]any, []any, string, bool, nil,
// json.Number (as encoding/json produces with UseNumber), and Go integers
// and floats. Other values are converted first: maps whose keys are strings
// (including YAML's map[any]any), slices, arrays, pointers and named basic
// types directly, structs and json.Marshaler or encoding.TextMarshaler
// types through their JSON encoding. A part that has no JSON form (a
// non-string mapping key, NaN, a channel) is reported as a violation.
func Validate(name Name, v any) error {
	c, err := lookup(name)
	if err != nil {
		return err
	}
	vs := c.check(v)
	if len(vs) == 0 {
		return nil
	}
	return &ValidationError{Schema: name, Violations: vs}
}

// Check is the detailed form of [Validate]: it returns the violations of v
// against the named schema, sorted by pointer, or nil if v is valid. If the
// name is unknown or the schema cannot be compiled, the result is a single
// violation at the root describing that error.
func Check(name Name, v any) []Violation {
	c, err := lookup(name)
	if err != nil {
		return []Violation{{Message: err.Error()}}
	}
	return c.check(v)
}

// compiled is one schema, ready to validate.
type compiled struct {
	schema *jsonschema.Schema
	doc    any // the decoded schema document, for x-message lookups
	err    error
}

var (
	compileOnce sync.Once
	registry    map[Name]*compiled
)

func lookup(name Name) (*compiled, error) {
	compileOnce.Do(compileAll)
	c, ok := registry[name]
	if !ok {
		return nil, unknownName(name)
	}
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// compileAll compiles every embedded schema, each with its own compiler so
// that one broken schema does not affect the others.
func compileAll() {
	registry = make(map[Name]*compiled, len(allNames))
	for _, name := range allNames {
		src, err := files.ReadFile(string(name))
		if err != nil {
			registry[name] = &compiled{err: fmt.Errorf("reading embedded schema %s: %w", name, err)}
			continue
		}
		registry[name] = newCompiled(name, src)
	}
}

// newCompiled compiles one schema document; a failure is kept in err.
func newCompiled(name Name, src []byte) *compiled {
	c := &compiled{}
	c.schema, c.doc, c.err = compile(name, src)
	if c.err != nil {
		c.err = fmt.Errorf("compiling embedded schema %s: %w", name, c.err)
	}
	return c
}

func compile(name Name, src []byte) (*jsonschema.Schema, any, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		return nil, nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(name.URL(), doc); err != nil {
		return nil, nil, err
	}
	sch, err := c.Compile(name.URL())
	if err != nil {
		return nil, nil, err
	}
	return sch, doc, nil
}

// printer renders the library's messages.
var printer = message.NewPrinter(language.English)

func (c *compiled) check(v any) []Violation {
	nv, vs := normalize(v)
	if len(vs) > 0 {
		sortViolations(vs)
		return vs
	}
	err := c.schema.Validate(nv)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []Violation{{Message: err.Error()}}
	}
	c.collect(verr, &vs)
	sortViolations(vs)
	return slices.Compact(vs)
}

// collect appends the violations of one error tree to out. Container errors
// (the schema, a group, a $ref, allOf) are replaced by their causes; every
// other error is reported once, at its own location.
func (c *compiled) collect(e *jsonschema.ValidationError, out *[]Violation) {
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		if len(e.Causes) > 0 {
			for _, cause := range e.Causes {
				c.collect(cause, out)
			}
			return
		}
	case *kind.AdditionalProperties:
		custom := c.customMessage(e.SchemaURL, "additionalProperties")
		for _, p := range k.Properties {
			msg := custom
			if msg == "" {
				msg = fmt.Sprintf("property %q is not allowed here", p)
			}
			*out = append(*out, Violation{Pointer: pointer(append(slices.Clone(e.InstanceLocation), p)), Message: msg})
		}
		return
	case *kind.PropertyNames:
		// SchemaURL points at the propertyNames subschema; the message
		// lives on the schema that holds it.
		msg := c.customMessage(strings.TrimSuffix(e.SchemaURL, "/propertyNames"), "propertyNames")
		if msg == "" {
			msg = "invalid property name"
			if len(e.Causes) > 0 {
				msg += ": " + leafMessage(e.Causes[0])
			}
		}
		*out = append(*out, Violation{Pointer: pointer(append(slices.Clone(e.InstanceLocation), k.Property)), Message: msg})
		return
	}
	*out = append(*out, Violation{Pointer: pointer(e.InstanceLocation), Message: c.message(e)})
}

// message returns the operator-facing message of a single error: the
// schema's x-message for the failing keyword if there is one, followed by
// the library's own detail when that detail says something useful.
func (c *compiled) message(e *jsonschema.ValidationError) string {
	detail := e.ErrorKind.LocalizedString(printer)
	custom := c.customMessage(e.SchemaURL, keyword(e.ErrorKind))
	if custom == "" {
		return detail
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Not, *kind.FalseSchema, *kind.Contains, *kind.MinContains, *kind.MaxContains,
		*kind.AnyOf, *kind.OneOf:
		// The library's message adds nothing to the custom one.
		return custom
	case *kind.Pattern:
		// Show the offending value, not the regular expression.
		return fmt.Sprintf("%s (got %q)", custom, k.Got)
	}
	return custom + " (" + detail + ")"
}

// leafMessage returns the first concrete message found in an error tree.
func leafMessage(e *jsonschema.ValidationError) string {
	for {
		switch e.ErrorKind.(type) {
		case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
			if len(e.Causes) > 0 {
				e = e.Causes[0]
				continue
			}
		}
		return e.ErrorKind.LocalizedString(printer)
	}
}

// keyword names the schema keyword that produced an error kind.
func keyword(k jsonschema.ErrorKind) string {
	if p := k.KeywordPath(); len(p) > 0 {
		return p[0]
	}
	switch k.(type) {
	case *kind.Not:
		return "not"
	case *kind.FalseSchema:
		return "false"
	}
	return ""
}

// customMessage looks up the x-message annotation for keyword kw in the
// subschema at schemaURL (an absolute URL whose fragment is a JSON pointer
// into this schema's document).
func (c *compiled) customMessage(schemaURL, kw string) string {
	if kw == "" {
		return ""
	}
	_, frag, _ := strings.Cut(schemaURL, "#")
	node := c.doc
	if frag != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			if t, err := url.PathUnescape(tok); err == nil {
				tok = t
			}
			tok = unescapeToken(tok)
			switch n := node.(type) {
			case map[string]any:
				node = n[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(n) {
					return ""
				}
				node = n[i]
			default:
				return ""
			}
		}
	}
	sub, _ := node.(map[string]any)
	msgs, _ := sub["x-message"].(map[string]any)
	msg, _ := msgs[kw].(string)
	return msg
}

// pointer builds an RFC 6901 JSON pointer from reference tokens.
func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(escapeToken(t))
	}
	return sb.String()
}

func escapeToken(t string) string {
	t = strings.ReplaceAll(t, "~", "~0")
	return strings.ReplaceAll(t, "/", "~1")
}

func unescapeToken(t string) string {
	t = strings.ReplaceAll(t, "~1", "/")
	return strings.ReplaceAll(t, "~0", "~")
}

// sortViolations orders violations by pointer, comparing array indexes
// numerically (so /reactor/2 comes before /reactor/10), then by message.
func sortViolations(vs []Violation) {
	slices.SortStableFunc(vs, func(a, b Violation) int {
		if c := comparePointers(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
}

func comparePointers(a, b string) int {
	if a == b {
		return 0
	}
	ta, tb := splitPointer(a), splitPointer(b)
	for i := 0; i < len(ta) && i < len(tb); i++ {
		if ta[i] == tb[i] {
			continue
		}
		na, errA := strconv.ParseUint(ta[i], 10, 64)
		nb, errB := strconv.ParseUint(tb[i], 10, 64)
		if errA == nil && errB == nil && na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
		return strings.Compare(ta[i], tb[i])
	}
	return len(ta) - len(tb)
}

func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p[1:], "/")
}
