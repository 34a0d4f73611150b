package bridge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
)

// stampKey is the key every Salt master adds to an event's data when it fires
// the event on its own bus.
const stampKey = "_stamp"

// MsgID derives the de-duplication id that becomes the Nats-Msg-Id header of
// an event, so that JetStream keeps one copy of an event however many bridges
// publish it.
//
// The id is the SHA-256, hex-encoded and truncated to 32 characters (128
// bits), of the tag, a NUL byte, and the canonical JSON of data with its
// top-level "_stamp" key removed. Canonical JSON is data decoded (numbers kept
// as their literal text) and encoded again by encoding/json: object keys
// sorted, no insignificant whitespace, strings re-escaped the same way, so
// formatting, key order and \u escapes (Python's ensure_ascii) do not matter.
// The NUL separator cannot occur in canonical JSON, so no (tag, data) pair
// can collide with another by moving bytes across the boundary.
//
// Why drop "_stamp": in a multi-master setup a minion sends the same return
// (same jid, same payload) to every master, and each master's bridge sees it.
// The masters stamp the event independently, so "_stamp" is the one field in
// which the copies differ; without it the copies hash alike and JetStream's
// duplicate window keeps one. Only the top-level key is removed: the nested
// data of a minion-fired event is the minion's payload, identical on every
// master.
//
// The cost of that choice: two genuinely distinct events whose tag and data
// are equal apart from "_stamp" (a beacon or presence event repeating the same
// values, a minion re-sending an identical custom event) also share an id, so
// the second one is dropped if it arrives within the stream's Duplicates
// window. Keep that window shorter than the shortest interval at which such
// identical events repeat (it only has to cover the skew between masters and
// a bridge's publish retries), or accept the loss for those events.
//
// If data is not valid JSON the raw bytes are hashed instead; the bridge never
// publishes such events (they are counted as malformed).
func MsgID(tag string, data json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(tag))
	h.Write([]byte{0})
	if canon, err := canonicalData(data); err == nil {
		h.Write(canon)
	} else {
		h.Write(data)
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:16])
}

// canonicalData returns data re-encoded canonically, without the top-level
// "_stamp" key when data is an object.
func canonicalData(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("bridge: trailing data after JSON value")
	}
	if m, ok := v.(map[string]any); ok {
		delete(m, stampKey)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
