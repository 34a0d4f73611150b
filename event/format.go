package event

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Envelope encodes ev as {"tag": ..., "data": {...}}: what the bridge and
// fire publish, and what replay and fire --events read.
func Envelope(ev Event) ([]byte, error) {
	b := []byte(`{"tag":`)
	b, _ = AppendJSON(b, ev.Tag)
	b = append(b, `,"data":`...)
	raw, err := json.Marshal(ev.Data)
	if err != nil {
		return nil, fmt.Errorf("encoding data of %s: %w", ev.Tag, err)
	}
	b = append(b, raw...)
	return append(b, '}'), nil
}

// Pretty formats ev as salt-run state.event pretty=True prints it: the
// tag, a tab, and the data as JSON indented by 4 with sorted keys, then a
// newline.
func Pretty(ev Event) []byte {
	raw, _ := json.Marshal(ev.Data) // encoding/json sorts map keys
	var b bytes.Buffer
	b.WriteString(ev.Tag)
	b.WriteByte('\t')
	if err := json.Indent(&b, raw, "", "    "); err != nil {
		b.Write(raw)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// Formatter formats one event as text ending in a newline; id is
// reactord's event id of an archived event ("" for none).
type Formatter func(ev Event, id string) ([]byte, error)

// Format returns the formatter named by a command's --out: "pretty" (also
// "text" and "") or "json". An event id goes in a comment line before a
// pretty event ("# event_id=ID", which replay and fire --events skip), or
// in an "event_id" member after "data" in JSON (which they ignore).
func Format(name string) (Formatter, error) {
	switch name {
	case "pretty", "text", "":
		return func(ev Event, id string) ([]byte, error) {
			if id == "" {
				return Pretty(ev), nil
			}
			return append([]byte("# event_id="+id+"\n"), Pretty(ev)...), nil
		}, nil
	case "json":
		return func(ev Event, id string) ([]byte, error) {
			line, err := Envelope(ev)
			if err != nil {
				return nil, err
			}
			if id != "" {
				line = append(line[:len(line)-1], `,"event_id":`...)
				line, _ = AppendJSON(line, id)
				line = append(line, '}')
			}
			return append(line, '\n'), nil
		}, nil
	}
	return nil, fmt.Errorf("--out %q: want pretty or json", name)
}
