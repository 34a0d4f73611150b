// Package event holds the values that travel between reactord's stages: a
// Salt event as it arrives from the bus and the low chunks compiled from the
// reactions it triggers. It depends on nothing else in reactord, so every other
// package can import it.
package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Event is one Salt event: a tag and its data dictionary.
type Event struct {
	// Tag is the Salt event tag, e.g. "salt/minion/web1/start".
	Tag string `json:"tag"`
	// Data is the event's data dictionary. Integers are int64 (or
	// json.Number when they do not fit), other numbers float64, objects
	// map[string]any and arrays []any.
	Data map[string]any `json:"data"`
}

// ErrNoTag reports an event envelope without a usable tag.
var ErrNoTag = errors.New("event has no tag")

// Decode parses one event envelope, `{"tag": ..., "data": {...}}`, or a line in
// the format of `salt-run state.event` (`TAG<tab>{json}`).
func Decode(line []byte) (Event, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Event{}, errors.New("empty event line")
	}
	if line[0] != '{' {
		tag, rest, ok := bytes.Cut(line, []byte{'\t'})
		if !ok {
			// salt-run state.event also separates with whitespace when
			// pretty printing is off; accept the first space.
			tag, rest, ok = bytes.Cut(line, []byte{' '})
		}
		if !ok || len(bytes.TrimSpace(tag)) == 0 {
			return Event{}, fmt.Errorf("line is neither a JSON envelope nor TAG<tab>JSON")
		}
		if !utf8.Valid(tag) {
			return Event{}, fmt.Errorf("event tag %q: %w", tag, ErrInvalidUTF8)
		}
		data, err := DecodeData(bytes.TrimSpace(rest))
		if err != nil {
			return Event{}, fmt.Errorf("event %q: %w", tag, err)
		}
		return Event{Tag: string(tag), Data: data}, nil
	}
	tag, raw, err := SplitEnvelope(line)
	if err != nil {
		return Event{}, err
	}
	data, err := DecodeData(raw)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w", tag, err)
	}
	return Event{Tag: tag, Data: data}, nil
}

// SplitEnvelope extracts the tag and the raw bytes of the data object from a
// JSON envelope without decoding the data, so events that match no rule cost
// almost nothing. A missing data member yields nil raw bytes. The whole
// envelope is validated: a string anywhere in it that is not valid UTF-8
// makes it malformed (an error wrapping ErrInvalidUTF8).
func SplitEnvelope(line []byte) (tag string, data []byte, err error) {
	return splitFast(line)
}

// DecodeData decodes an event's data object. Salt requires data to be a
// dictionary; null or absent data becomes an empty one.
func DecodeData(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	return decodeFast(raw)
}

// NormalizeNumbers rewrites json.Number values in place: integers that fit
// become int64, other numbers float64; integers too large for int64 stay
// json.Number so they print exactly as sent. Templates can then compare
// numbers with eq/lt and print integers as integers.
func NormalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = NormalizeNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = NormalizeNumbers(e)
		}
		return x
	case json.Number:
		return Number(string(x))
	}
	return v
}

// Number converts the text of a JSON number into int64, float64 or, for
// integers beyond int64, json.Number.
func Number(s string) any {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
		return json.Number(s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return json.Number(s)
	}
	return f
}
