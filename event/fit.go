package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// TruncatedKey is the data key Fit adds to an event it cut: an object naming
// each replaced key with its original size in bytes.
const TruncatedKey = "_reactord_truncated"

// Cut is one value Fit replaced with a marker.
type Cut struct {
	// Key is the top-level data key whose value was replaced.
	Key string
	// Bytes is the size of the replaced value's JSON.
	Bytes int
}

// ErrCannotFit reports an event that stays over the limit even with every
// data value cut: its tag and keys alone are too big.
var ErrCannotFit = errors.New("event does not fit even with its data values cut")

// Fit returns an envelope ({"tag","data"} JSON) of at most limit bytes. An
// envelope that fits is returned as it is. Otherwise values of the data
// object are replaced, "return" first (a job's return is what makes events
// big), then the largest others, by a string marker saying how many bytes
// were cut and why, until the envelope fits; the data object also gets the
// key TruncatedKey, {key: original bytes}. The tag, the order of the keys
// and every value that was not cut are kept, so a job return still names
// its jid, minion, function, success and retcode.
func Fit(body []byte, limit int) ([]byte, []Cut, error) {
	if limit <= 0 || len(body) <= limit {
		return body, nil, nil
	}
	tag, raw, err := SplitEnvelope(body)
	if err != nil {
		return nil, nil, err
	}
	keys, vals, err := members(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("event %q: data: %w", tag, err)
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ia, ib := order[a], order[b]
		if (keys[ia] == "return") != (keys[ib] == "return") {
			return keys[ia] == "return"
		}
		return len(vals[ia]) > len(vals[ib])
	})
	var cuts []Cut
	for _, i := range order {
		if keys[i] == TruncatedKey {
			continue
		}
		marker, _ := json.Marshal(fmt.Sprintf("<reactord: %d bytes cut: the event exceeded the NATS max_payload of %d bytes>", len(vals[i]), limit))
		if len(marker) >= len(vals[i]) {
			continue
		}
		cuts = append(cuts, Cut{Key: keys[i], Bytes: len(vals[i])})
		vals[i] = marker
		if out := assemble(tag, keys, vals, cuts); len(out) <= limit {
			return out, cuts, nil
		}
	}
	return nil, cuts, fmt.Errorf("event %q (%d bytes, limit %d): %w", tag, len(body), limit, ErrCannotFit)
}

// members splits a JSON object into its keys and raw values, in order.
func members(raw []byte) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys = append(keys, k)
		vals = append(vals, v)
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return nil, nil, err
	}
	return keys, vals, nil
}

func assemble(tag string, keys []string, vals []json.RawMessage, cuts []Cut) []byte {
	b := []byte(`{"tag":`)
	b, _ = AppendJSON(b, tag)
	b = append(b, `,"data":{`...)
	for i, k := range keys {
		if k == TruncatedKey {
			continue // a forged or earlier marker is replaced by ours
		}
		if len(b) > 0 && b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b, _ = AppendJSON(b, k)
		b = append(b, ':')
		b = append(b, vals[i]...)
	}
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b, _ = AppendJSON(b, TruncatedKey)
	b = append(b, `:{`...)
	for i, c := range cuts {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = AppendJSON(b, c.Key)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(c.Bytes), 10)
	}
	return append(b, "}}}"...)
}
