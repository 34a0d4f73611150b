package event

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// RecordReader reads event records from a file of events, in any of the
// formats reactord prints and reads:
//
//   - one JSON envelope {"tag": ..., "data": {...}} per line (events
//     --out json);
//   - one state.event line, TAG<tab>{json} (salt-run state.event);
//   - the multi-line format of salt-run state.event pretty=True and of
//     reactord events: TAG<tab>{ on a line, the data indented over the
//     lines after it, up to the line where the object closes.
//
// Blank lines and comment lines (starting with "# ", as the event id
// headers reactord events --since prints) are skipped. A record whose
// object never closes ends at the first blank line or the first line that
// is not indented and does not close a bracket; it is returned as it is, so
// decoding it fails and names its first line.
type RecordReader struct {
	br      *bufio.Reader
	line    int    // lines read so far
	pending []byte // a line read that starts the next record
	pendNum int    // its line number
	err     error  // the read error after pending, if any
}

// NewRecordReader returns a RecordReader reading r.
func NewRecordReader(r io.Reader) *RecordReader {
	return &RecordReader{br: bufio.NewReaderSize(r, 1<<20)}
}

// readLine returns the next line, its number, and the read error that
// followed it (io.EOF at the end).
func (rr *RecordReader) readLine() ([]byte, int, error) {
	if rr.pending != nil || rr.err != nil {
		l, n, err := rr.pending, rr.pendNum, rr.err
		rr.pending, rr.err = nil, nil
		return l, n, err
	}
	l, err := rr.br.ReadBytes('\n')
	rr.line++
	return l, rr.line, err
}

// Next returns the next record and the number of its first line in the
// input (counting from 1). At the end of the input it returns io.EOF; a
// read error is returned as is, after the records read before it.
func (rr *RecordReader) Next() (rec []byte, line int, err error) {
	for {
		l, n, rerr := rr.readLine()
		t := bytes.TrimSpace(l)
		if len(t) == 0 || isComment(t) {
			if rerr != nil {
				return nil, n, eofOr(rerr)
			}
			continue
		}
		depth := openDepth(t)
		if depth <= 0 || rerr != nil {
			// A one-line record (the JSON envelope always is one).
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				rr.err = rerr
			}
			return l, n, nil
		}
		rec = l
		for depth > 0 {
			c, cn, cerr := rr.readLine()
			if !continues(c) {
				// Not part of this record: keep it for the next one.
				rr.pending, rr.pendNum, rr.err = c, cn, cerr
				if c == nil {
					rr.pending = []byte{}
				}
				return rec, n, nil
			}
			rec = append(rec, c...)
			depth += bracketDelta(c)
			if cerr != nil {
				if !errors.Is(cerr, io.EOF) {
					rr.err = cerr
				}
				return rec, n, nil
			}
		}
		return rec, n, nil
	}
}

// eofOr is io.EOF for io.EOF, else err.
func eofOr(err error) error {
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	return err
}

// isComment reports whether a trimmed line is a comment ("# ..." or "#").
func isComment(t []byte) bool {
	return t[0] == '#' && (len(t) == 1 || t[1] == ' ')
}

// openDepth is how many brackets the first line of a record leaves open:
// 0 for a JSON envelope (always one line) and for a complete
// TAG<tab>{json} line, more when the data goes on over the next lines.
func openDepth(t []byte) int {
	if t[0] == '{' {
		return 0
	}
	// The tag ends at the tab, or at the first space (as Decode reads it).
	i := bytes.IndexByte(t, '\t')
	if i < 0 {
		i = bytes.IndexByte(t, ' ')
	}
	if i < 0 {
		return 0
	}
	rest := bytes.TrimSpace(t[i:])
	if len(rest) == 0 || rest[0] != '{' {
		return 0
	}
	return bracketDelta(rest)
}

// continues reports whether line can be part of a multi-line record: the
// indented lines inside the data and the closing bracket are; a blank line,
// the end of the input or a line starting a new record are not.
func continues(line []byte) bool {
	if len(bytes.TrimSpace(line)) == 0 {
		return false
	}
	switch line[0] {
	case ' ', '\t', '}', ']':
		return true
	}
	return false
}

// bracketDelta counts the brackets that b opens minus those it closes,
// outside JSON strings (a JSON string never spans lines).
func bracketDelta(b []byte) int {
	d := 0
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			d++
		case '}', ']':
			d--
		}
	}
	return d
}
