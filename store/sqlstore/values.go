package sqlstore

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/reactord/reactord/event"
)

// Column widths, in characters, of Salt's varchar columns and of
// reactord_ledger's. Longer strings are cut so that one odd record does not
// make the database refuse a whole batch.
const (
	widthFun     = 50      // salt_returns.fun varchar(50)
	widthSuccess = 10      // salt_returns.success varchar(10)
	widthID      = 255     // jid, minion id, tag, master_id: varchar(255)
	widthStage   = 32      // reactord_ledger.stage
	widthText    = 4096    // reactord_ledger rule, file, reaction_id (MySQL TEXT)
	widthDetail  = 1 << 20 // reactord_ledger.detail (MySQL MEDIUMTEXT)
)

// replacement stands for bytes and characters a database cannot store.
const replacement = "\uFFFD"

// cleanString makes s storable in a column of width characters (no limit
// when width is 0): valid UTF-8, no NUL when nul is false (PostgreSQL text
// cannot hold one), at most width characters.
func cleanString(s string, width int, nul bool) string {
	s, _ = cutString(s, width, nul)
	return s
}

// cutString is cleanString that also reports whether s was cut to width.
func cutString(s string, width int, nul bool) (string, bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, replacement)
	}
	if !nul && strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", replacement)
	}
	if width > 0 && len(s) > width {
		n := 0
		for i := range s {
			if n == width {
				return s[:i], true
			}
			n++
		}
	}
	return s, false
}

// cleanJSON makes raw storable as a JSON document: empty becomes null,
// invalid UTF-8 is replaced, anything that is not valid JSON is stored as a
// JSON string of its text, and (when nul is false, for PostgreSQL's jsonb)
// the escape \u0000 becomes \ufffd.
func cleanJSON(raw []byte, nul bool) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "null"
	}
	if !utf8.Valid(raw) {
		raw = bytes.ToValidUTF8(raw, []byte(replacement))
	}
	if !json.Valid(raw) {
		raw, _ = json.Marshal(string(raw))
	}
	if !nul && bytes.Contains(raw, []byte(`\u0000`)) {
		raw = replaceNULEscapes(raw)
	}
	return string(raw)
}

// replaceNULEscapes rewrites each \u0000 escape of a valid JSON document as
// \ufffd. In valid JSON a backslash only occurs inside strings, where it
// starts a two-character escape or a \uXXXX one, so skipping escapes pair by
// pair finds every real \u0000 and never the text of an escaped backslash.
func replaceNULEscapes(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			out = append(out, c)
			continue
		}
		if raw[i+1] == 'u' && i+6 <= len(raw) && string(raw[i+2:i+6]) == "0000" {
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		out = append(out, c, raw[i+1])
		i++
	}
	return out
}

// stampLayout is the layout of Salt's "_stamp": Python's
// datetime.utcnow().isoformat() (which leaves out a zero fraction; parsing
// accepts both).
const stampLayout = "2006-01-02T15:04:05.000000"

// formatStamp formats t as a Salt "_stamp".
func formatStamp(t time.Time) string {
	return t.UTC().Format(stampLayout)
}

// stampKey is the member withStamp looks for.
var stampKey = [...]string{"_stamp"}

// withStamp returns load with "_stamp": t added when load is a JSON object
// without one, so that the job's time survives in Salt's jids table, which
// has no time column.
func withStamp(load json.RawMessage, t time.Time) json.RawMessage {
	trimmed := bytes.TrimSpace(load)
	if len(trimmed) < 2 || trimmed[0] != '{' {
		return load
	}
	var stampOf [1][]byte
	if !event.Members(trimmed, stampKey[:], stampOf[:]) || stampOf[0] != nil {
		return load
	}
	empty := len(bytes.TrimSpace(trimmed[1:len(trimmed)-1])) == 0
	stamp, _ := json.Marshal(formatStamp(t))
	out := make([]byte, 0, len(trimmed)+len(stamp)+12)
	out = append(out, `{"_stamp":`...)
	out = append(out, stamp...)
	if !empty {
		out = append(out, ',')
	}
	return append(out, trimmed[1:]...)
}

// jidLayout is the layout of a Salt jid without its six digits of
// microseconds: salt.utils.jid.gen_jid formats
// datetime.now() (or utcnow() with utc_jid) as %Y%m%d%H%M%S%f.
const jidLayout = "20060102150405"

// jidString formats t as a Salt jid.
func jidString(t time.Time) string {
	return t.Format(jidLayout) + t.Format(".000000")[1:]
}

// parseDBTime parses a time read back as text (SQLite).
func parseDBTime(s string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04:05Z07:00", time.RFC3339Nano, "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// globPrefix returns the literal beginning of a Salt tag glob: every tag the
// glob matches starts with it. It stops at the first character that is
// special to fnmatch or stands for invalid UTF-8.
func globPrefix(glob string) string {
	for i, r := range glob {
		switch r {
		case '*', '?', '[', utf8.RuneError:
			return glob[:i]
		}
	}
	return glob
}

// likeEscape escapes s for a LIKE pattern whose escape character is '!'.
func likeEscape(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// replaceTopLevel returns the JSON object doc with the value of its key
// replaced by value, keeping the rest of doc byte for byte; doc itself when
// it is not an object or has no such key.
func replaceTopLevel(doc json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return doc
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return doc
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return doc
		}
		if k, _ := t.(string); k == key {
			end := int(dec.InputOffset())
			start := end - len(v)
			out := make([]byte, 0, len(doc)-len(v)+len(value))
			out = append(out, doc[:start]...)
			out = append(out, value...)
			return append(out, doc[end:]...)
		}
	}
	return doc
}
