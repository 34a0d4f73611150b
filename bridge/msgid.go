package bridge

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// stampKey is the key a Salt master sets in an event's data each time it
// fires the event on its bus (salt.utils.event.SaltEvent.fire_event:
// datetime.utcnow().isoformat(), microsecond precision, overwriting any
// value the data carried).
const stampKey = "_stamp"

// peerKey is the key a member of a Salt master cluster (3007: cluster_id,
// cluster_peers) adds to the data of each event it receives from a peer
// and fires again on its own bus: the id of the member that fired it
// first. The member leaves the rest of the data as the peer fired it,
// "_stamp" included, so every member's bus carries one emission with the
// same stamp, once without peerKey (on the member that fired it) and once
// on each peer with it.
const peerKey = "__peer_id"

// MsgID derives the de-duplication id that becomes the Nats-Msg-Id header of
// an event: it identifies one emission of one event on one master, so that
// JetStream keeps one copy of that emission however many bridges (or
// publish retries) carry it, and none of a genuine repeat.
//
// The id is the SHA-256, hex-encoded and truncated to 32 characters (128
// bits), of the tag, a NUL byte, and the canonical JSON of data, "_stamp"
// included and a top-level "__peer_id" left out (peerKey: the copies of one
// emission that the members of a master cluster fire get one id, so one
// bridge per member feeding one stream stores each emission once). Canonical JSON is data decoded (numbers kept as their literal
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
// reactor runs once on each master); the daemon's --dedupe-masters tells
// them apart (CopyKey).
//
// MsgID returns "" when data is not a JSON object with a non-empty string
// "_stamp" (not an event fired by a Salt master, or not JSON): nothing then
// tells a repeat from a new emission. The bridge gives such an event a
// random id when it receives it (see receiptID), so its publish retries
// still collapse but a repeat is never dropped.
func MsgID(tag string, data json.RawMessage) string {
	canon, stamp, err := canonicalData(data, false)
	if err != nil || stamp == "" {
		return ""
	}
	return hashID(tag, canon)
}

func hashID(tag string, canon []byte) string {
	h := sha256.New()
	h.Write([]byte(tag))
	h.Write([]byte{0})
	h.Write(canon)
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:16])
}

// stampLayout is the layout of a master's "_stamp" (Python's
// datetime.utcnow().isoformat(): UTC, no zone; microseconds, left out
// when they are 0).
const stampLayout = "2006-01-02T15:04:05.999999"

// CopyKey identifies an event independently of the master that fired it:
// MsgID's hash of the tag and the canonical data with the top-level
// "_stamp" (and, as in MsgID, "__peer_id") left out, and that stamp, the time the master fired it. The
// masters of a multi-master pair each fire their own copy of what a minion
// sends them (an event.send, a beacon, a job return, salt/auth): the
// copies have the same key and stamps a clock skew and a network delay
// apart, while a genuine repeat has the same key and a later stamp (see
// the daemon's --dedupe-masters). ok is false when data has no "_stamp" in
// Salt's format.
func CopyKey(tag string, data json.RawMessage) (key string, stamp time.Time, ok bool) {
	canon, s, err := canonicalData(data, true)
	if err != nil || s == "" {
		return "", time.Time{}, false
	}
	at, err := time.Parse(stampLayout, s)
	if err != nil {
		return "", time.Time{}, false
	}
	return hashID(tag, canon), at, true
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

// canonicalData returns data re-encoded canonically, without its
// top-level "__peer_id", and without its top-level "_stamp" when dropStamp
// is set, and that "_stamp" when data is an object with a non-empty string
// there ("" otherwise).
func canonicalData(data []byte, dropStamp bool) ([]byte, string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "", err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "", errors.New("bridge: trailing data after JSON value")
	}
	stamp := ""
	if m, ok := v.(map[string]any); ok {
		stamp, _ = m[stampKey].(string)
		delete(m, peerKey)
		if dropStamp {
			delete(m, stampKey)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, "", err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), stamp, nil
}
