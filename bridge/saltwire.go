package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/reactord/reactord/event"
)

// Salt's master event publisher (master_event_pub.ipc in sock_dir) writes a
// stream of msgpack values with no other framing, one per event:
//
//   - Salt 3006 (salt.transport.ipc.IPCMessagePublisher) writes
//     frame_msg_ipc: {"head": {}, "body": <bin>} packed with use_bin_type,
//     so the keys are str and the body is bin.
//   - Salt 3007 (salt.transport.tcp.PublishServer on a unix socket) writes
//     frame_msg: the same map, packed with Salt's msgpack defaults.
//
// Either way the body is SaltEvent.pack's output: the tag, "\n\n", and the
// data dict packed with msgpack (use_bin_type, Salt's ext types 78 for
// datetimes and 79 for its constants). readFrame and eventJSON accept both,
// with keys and strings as str or bin.

// tagEnd separates the tag from the packed data in an event body.
var tagEnd = []byte("\n\n")

// maxFrameDepth bounds the nesting of event data.
const maxFrameDepth = 200

// errNotEvent reports a frame that is not a Salt event.
var errNotEvent = errors.New("frame is not a Salt event")

// SaltFrame returns one event framed as Salt's master event publisher writes
// it (and as its pull socket, master_event_pull.ipc, reads it):
// {"head": {}, "body": tag + "\n\n" + data}, where data is the event's
// dict already packed with msgpack. Tests and tools use it to stand in for
// a master, or to fire events into one.
func SaltFrame(tag string, data []byte) []byte {
	var out bytes.Buffer
	e := msgpack.NewEncoder(&out)
	// Writes to a bytes.Buffer do not fail.
	_ = e.EncodeMapLen(2)
	_ = e.EncodeString("head")
	_ = e.EncodeMapLen(0)
	_ = e.EncodeString("body")
	_ = e.EncodeBytes(append(append([]byte(tag), tagEnd...), data...))
	return out.Bytes()
}

// readFrame reads one frame from d and returns its body (the packed event).
func readFrame(d *msgpack.Decoder) ([]byte, error) {
	code, err := d.PeekCode()
	if err != nil {
		return nil, err
	}
	if msgpcode.IsString(code) || msgpcode.IsBin(code) {
		// A bare body, without the head/body map.
		return d.DecodeBytes()
	}
	if !msgpcode.IsFixedMap(code) && code != msgpcode.Map16 && code != msgpcode.Map32 {
		if err := d.Skip(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: msgpack code %#x instead of a head/body map", errNotEvent, code)
	}
	n, err := d.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	var body []byte
	found := false
	var bad error
	for i := 0; i < n; i++ {
		key, err := d.DecodeBytes()
		if err != nil {
			return nil, fmt.Errorf("frame key: %w", err)
		}
		code, err := d.PeekCode()
		if err != nil {
			return nil, err
		}
		if string(key) != "body" || (!msgpcode.IsString(code) && !msgpcode.IsBin(code)) {
			if string(key) == "body" {
				bad = fmt.Errorf("%w: body is not bytes (msgpack code %#x)", errNotEvent, code)
			}
			if err := d.Skip(); err != nil {
				return nil, err
			}
			continue
		}
		if body, err = d.DecodeBytes(); err != nil {
			return nil, err
		}
		found = true
	}
	if bad != nil {
		return nil, bad
	}
	if !found {
		return nil, fmt.Errorf("%w: frame has no body", errNotEvent)
	}
	return body, nil
}

// eventJSON splits an event body ("tag\n\n" + packed data) into its tag
// and its data as compact JSON, keeping the order of the data's keys and
// writing floats as Python does.
func eventJSON(body []byte) (tag string, data []byte, err error) {
	rawTag, packed, ok := bytes.Cut(body, tagEnd)
	if !ok {
		return "", nil, fmt.Errorf("%w: no tag separator", errNotEvent)
	}
	if len(rawTag) == 0 {
		return "", nil, event.ErrNoTag
	}
	if !utf8.Valid(rawTag) {
		return "", nil, errors.New("tag is not valid UTF-8")
	}
	tag = string(rawTag)
	var b []byte
	d := msgpack.NewDecoder(bytes.NewReader(packed))
	code, err := d.PeekCode()
	if err != nil {
		return tag, nil, fmt.Errorf("event %q: data: %w", tag, err)
	}
	if code == msgpcode.Nil {
		b = append(b, "{}"...)
	} else {
		if !msgpcode.IsFixedMap(code) && code != msgpcode.Map16 && code != msgpcode.Map32 {
			return tag, nil, fmt.Errorf("event %q: data is not a dict (msgpack code %#x)", tag, code)
		}
		if b, err = appendValue(b, d, 0); err != nil {
			return tag, nil, fmt.Errorf("event %q: data: %w", tag, err)
		}
	}
	if _, err := d.PeekCode(); err != io.EOF {
		return tag, nil, fmt.Errorf("event %q: data: trailing bytes", tag)
	}
	return tag, b, nil
}

// appendValue converts one msgpack value to JSON.
func appendValue(b []byte, d *msgpack.Decoder, depth int) ([]byte, error) {
	if depth > maxFrameDepth {
		return nil, errors.New("nested too deeply")
	}
	code, err := d.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case code == msgpcode.Nil:
		return append(b, "null"...), d.DecodeNil()
	case code == msgpcode.True || code == msgpcode.False:
		v, err := d.DecodeBool()
		return strconv.AppendBool(b, v), err
	case msgpcode.IsFixedNum(code), code == msgpcode.Int8, code == msgpcode.Int16, code == msgpcode.Int32, code == msgpcode.Int64,
		code == msgpcode.Uint8, code == msgpcode.Uint16, code == msgpcode.Uint32:
		v, err := d.DecodeInt64()
		return strconv.AppendInt(b, v, 10), err
	case code == msgpcode.Uint64:
		v, err := d.DecodeUint64()
		return strconv.AppendUint(b, v, 10), err
	case code == msgpcode.Float || code == msgpcode.Double:
		v, err := d.DecodeFloat64()
		if err != nil {
			return nil, err
		}
		return event.AppendJSON(b, v)
	case msgpcode.IsString(code) || msgpcode.IsBin(code):
		s, err := d.DecodeBytes()
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(s) {
			return nil, errors.New("a string is not valid UTF-8")
		}
		return event.AppendJSON(b, string(s))
	case msgpcode.IsFixedArray(code) || code == msgpcode.Array16 || code == msgpcode.Array32:
		n, err := d.DecodeArrayLen()
		if err != nil {
			return nil, err
		}
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, d, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case msgpcode.IsFixedMap(code) || code == msgpcode.Map16 || code == msgpcode.Map32:
		n, err := d.DecodeMapLen()
		if err != nil {
			return nil, err
		}
		b = append(b, '{')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendKey(b, d); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendValue(b, d, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case msgpcode.IsExt(code):
		return appendExt(b, d)
	}
	return nil, fmt.Errorf("unsupported msgpack code %#x", code)
}

// appendKey writes a dict key as a JSON string, as Python's json.dumps
// does: str as is, int and float in their repr, True/False/None as
// true/false/null.
func appendKey(b []byte, d *msgpack.Decoder) ([]byte, error) {
	code, err := d.PeekCode()
	if err != nil {
		return nil, err
	}
	if msgpcode.IsString(code) || msgpcode.IsBin(code) {
		return appendValue(b, d, 0)
	}
	var scalar []byte
	switch {
	case code == msgpcode.Nil, code == msgpcode.True, code == msgpcode.False,
		msgpcode.IsFixedNum(code), code == msgpcode.Int8, code == msgpcode.Int16, code == msgpcode.Int32, code == msgpcode.Int64,
		code == msgpcode.Uint8, code == msgpcode.Uint16, code == msgpcode.Uint32, code == msgpcode.Uint64,
		code == msgpcode.Float, code == msgpcode.Double:
		if scalar, err = appendValue(nil, d, 0); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unsupported dict key (msgpack code %#x)", code)
	}
	return event.AppendJSON(b, string(scalar))
}

// appendExt writes Salt's ext types: 78 a datetime (as ISO 8601 text), 79 a
// constant (its name); others fail.
func appendExt(b []byte, d *msgpack.Decoder) ([]byte, error) {
	id, n, err := d.DecodeExtHeader()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > 1<<20 {
		return nil, fmt.Errorf("msgpack ext type %d of %d bytes", id, n)
	}
	raw := make([]byte, n)
	if n > 0 {
		if err := d.ReadFull(raw); err != nil {
			return nil, err
		}
	}
	switch id {
	case 78:
		// "%Y%m%dT%H:%M:%S.%f" → "YYYY-MM-DDTHH:MM:SS.ffffff"
		s := string(raw)
		if len(s) >= 17 && s[8] == 'T' {
			s = s[0:4] + "-" + s[4:6] + "-" + s[6:8] + s[8:]
		}
		return event.AppendJSON(b, s)
	case 79:
		inner := msgpack.NewDecoder(bytes.NewReader(raw))
		if l, err := inner.DecodeArrayLen(); err == nil && l == 2 {
			if name, err := inner.DecodeString(); err == nil {
				return event.AppendJSON(b, name)
			}
		}
		return nil, errors.New("malformed Salt constant (ext 79)")
	}
	return nil, fmt.Errorf("unsupported msgpack ext type %d", id)
}
