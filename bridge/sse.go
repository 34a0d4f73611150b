package bridge

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"time"
)

// maxLineBytes bounds one SSE line. salt-api writes a whole event as a single
// "data:" line, so this is the largest event the bridge accepts; a job return
// carrying a huge output can be many megabytes.
const maxLineBytes = 64 << 20

// sseEvent is one dispatched server-sent event, with salt-api's extra "tag"
// field.
type sseEvent struct {
	tag     string // value of the last "tag:" line (salt-api's own field)
	hasTag  bool
	data    []byte // "data:" lines joined with "\n", as the SSE spec builds it
	hasData bool
}

// sseReader parses a text/event-stream body as the WHATWG HTML specification
// ("Server-sent events", "Interpreting an event stream") describes: lines end
// in CRLF, LF or CR; a line starting with ':' is a comment; "field: value"
// strips one space after the colon; several "data" lines are joined with LF;
// a blank line dispatches the event; "retry" with only ASCII digits sets the
// reconnection time; unknown fields (salt-api's "tag" is one for browsers) are
// kept here because the bridge wants it. A block with neither data nor tag
// (for example a lone "retry: 400" block) dispatches nothing.
type sseReader struct {
	sc      *bufio.Scanner
	retry   time.Duration // last valid "retry:" value, 0 if none
	pending sseEvent      // fields seen since the last blank line
	started bool          // pending has at least one field line
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc}
}

// next returns the next event that carries a tag or data. At the end of the
// body it returns the scanner's error, or io.EOF for a clean end. Fields of an
// event that was not terminated by a blank line stay in partial().
func (r *sseReader) next() (sseEvent, error) {
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			ev, started := r.pending, r.started
			r.pending, r.started = sseEvent{}, false
			if started && (ev.hasData || ev.hasTag) {
				if ev.hasData {
					// The spec removes the LF added after the last data line.
					ev.data = bytes.TrimSuffix(ev.data, []byte{'\n'})
				}
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // comment (keep-alive)
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			r.pending.data = append(r.pending.data, value...)
			r.pending.data = append(r.pending.data, '\n')
			r.pending.hasData = true
			r.started = true
		case "tag":
			r.pending.tag = string(value)
			r.pending.hasTag = true
			r.started = true
		case "retry":
			if isASCIIDigits(value) {
				if ms, err := strconv.ParseInt(string(value), 10, 64); err == nil {
					r.retry = time.Duration(ms) * time.Millisecond
				}
			}
		default:
			// "event", "id" and unknown fields: salt-api sends none of them
			// and the bridge has no use for them.
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// partial reports the fields of an event cut off by the end of the stream
// (the spec discards them; the bridge counts and logs them instead).
func (r *sseReader) partial() (sseEvent, bool) {
	return r.pending, r.started && (r.pending.hasData || r.pending.hasTag)
}

func isASCIIDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// scanSSELines is a bufio.SplitFunc for SSE lines: it accepts CRLF, LF and a
// lone CR as terminators. A CR at the end of the buffered data waits for one
// more byte to tell CR from CRLF. A final line without terminator is
// returned at EOF so that its field lands in the pending event; it can never
// complete an event (that needs a blank line), so partial() reports it.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	i := bytes.IndexAny(data, "\r\n")
	if i < 0 {
		if atEOF && len(data) > 0 {
			// Unterminated last line: hand it over so that its field is
			// recorded in the pending event and reported as truncated.
			return len(data), data, nil
		}
		return 0, nil, nil
	}
	if data[i] == '\n' {
		return i + 1, data[:i], nil
	}
	// data[i] == '\r'
	if i+1 < len(data) {
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	}
	if atEOF {
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // need one more byte to tell CR from CRLF
}
