// Package position is where reactord says a problem is: a place in a
// file, and the one error type for a problem at such a place, which the
// configuration, reaction files, Jinja translation and rule conditions
// all report. An error with more to say than a message (a Jinja construct
// that cannot be translated, a target literal_target refuses) embeds Pos.
package position

import (
	"regexp"
	"strconv"
)

// Pos is a place in a file: its name ("" for a text of its own, such as a
// rule's condition) and its 1-based line and column (0: unknown).
type Pos struct {
	File      string
	Line, Col int
}

// String formats p as file:line:col, leaving out the parts that are
// unknown.
func (p Pos) String() string {
	var b []byte
	if p.File != "" {
		b = append(b, p.File...)
	}
	for _, n := range [...]int{p.Line, p.Col} {
		if n <= 0 {
			break
		}
		if len(b) > 0 {
			b = append(b, ':')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return string(b)
}

// Error is a problem at a position: file:line:col: message.
type Error struct {
	Pos
	// Msg says what is wrong there, and how to fix it when that is known.
	Msg string
	// Err is the error it comes from, if any.
	Err error
}

// Error formats the error as Pos, a colon and the message.
func (e *Error) Error() string {
	if p := e.Pos.String(); p != "" {
		return p + ": " + e.Msg
	}
	return e.Msg
}

// Unwrap returns the error it comes from.
func (e *Error) Unwrap() error { return e.Err }

// At returns an error at file, line and column.
func At(file string, line, col int, msg string, err error) *Error {
	return &Error{Pos: Pos{File: file, Line: line, Col: col}, Msg: msg, Err: err}
}

// positioned is a problem printed as Error prints one: file:line:col: .
var positioned = regexp.MustCompile(`^(.+?):(\d+):(\d+): `)

// Split reads back a problem printed as "file:line:col: message" (as
// Error formats one) into its position and message; ok is false when text
// does not start with a position.
func Split(text string) (p Pos, msg string, ok bool) {
	m := positioned.FindStringSubmatch(text)
	if m == nil {
		return Pos{}, text, false
	}
	p.File = m[1]
	p.Line, _ = strconv.Atoi(m[2])
	p.Col, _ = strconv.Atoi(m[3])
	return p, text[len(m[0]):], true
}
