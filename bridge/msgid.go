package bridge

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
)

// stampKey is the key a Salt master sets in an event's data each time it
// fires the event on its bus (salt.utils.event.SaltEvent.fire_event:
// datetime.utcnow().isoformat(), microsecond precision, overwriting any
// value the data carried).
const stampKey = "_stamp"

// MsgID derives the de-duplication id that becomes the Nats-Msg-Id header of
// an event: it identifies one emission of one event on one master, so that
// JetStream keeps one copy of that emission however many bridges (or
// publish retries) carry it, and none of a genuine repeat.
//
// The id is the SHA-256, hex-encoded and truncated to 32 characters (128
// bits), of the tag, a NUL byte, and the canonical JSON of data, "_stamp"
// included. Canonical JSON is data decoded (numbers kept as their literal
// text) and encoded again by encoding/json: object keys sorted, no
// insignificant whitespace, strings re-escaped the same way, so formatting,
// key order and \u escapes (Python's ensure_ascii) do not matter: the socket
// bridge and the salt-api bridge reading the same master give the same id.
// The NUL separator cannot occur in canonical JSON, so no (tag, data) pair
// can collide with another by moving bytes across the boundary.
//
// Why keep "_stamp": the master stamps every event it fires, with the time
// of that emission, so two beacon events with equal values ten seconds apart
// differ only there; without it the second would be dropped as a duplicate.
// The consequence for multi-master: a minion that sends an event to both
// masters of a pair is stamped by each master independently, so the two
// masters' copies have different ids and both are kept (as Salt's own
// reactor runs once on each master).
//
// MsgID returns "" when data is not a JSON object with a non-empty string
// "_stamp" (not an event fired by a Salt master, or not JSON): nothing then
// tells a repeat from a new emission. The bridge gives such an event a
// random id when it receives it (see receiptID), so its publish retries
// still collapse but a repeat is never dropped.
func MsgID(tag string, data json.RawMessage) string {
	canon, stamped, err := canonicalData(data)
	if err != nil || !stamped {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(tag))
	h.Write([]byte{0})
	h.Write(canon)
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:16])
}

// receiptID returns the id the bridge publishes an event with: MsgID, or for
// an event without a master's stamp a random id (32 hex digits) made once
// per received event and kept with it in the spool, so retrying its publish
// cannot duplicate it.
func receiptID(tag string, data json.RawMessage) string {
	if id := MsgID(tag, data); id != "" {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+ panics instead)
	return hex.EncodeToString(b[:])
}

// canonicalData returns data re-encoded canonically, and whether it is an
// object with a non-empty string "_stamp".
func canonicalData(data []byte) ([]byte, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false, errors.New("bridge: trailing data after JSON value")
	}
	stamped := false
	if m, ok := v.(map[string]any); ok {
		s, _ := m[stampKey].(string)
		stamped = s != ""
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), stamped, nil
}
