package event

import "strings"

// MinionOf returns the minion an event is about, for ordering: the id in
// salt/job/<jid>/ret/<id>, salt/minion/<id>/..., salt/beacon/<id>/...,
// else the top-level "id" string of the raw data, else "".
func MinionOf(tag string, rawData []byte) string {
	if jt, ok := ParseJobTag(tag); ok {
		if minion, ok := jt.Return(); ok && minion != "" {
			return minion
		}
	}
	switch {
	case strings.HasPrefix(tag, "salt/minion/"), strings.HasPrefix(tag, "salt/beacon/"):
		rest := tag[strings.IndexByte(tag[5:], '/')+6:]
		id, _, _ := strings.Cut(rest, "/")
		return id
	}
	if len(rawData) == 0 {
		return ""
	}
	return topLevelString(rawData, "id")
}

// topLevelString finds a top-level string member of a JSON object without
// decoding the rest: the last one when the key repeats, as Python's json
// (and so Salt, and the templates) read it; "" when absent, not a string,
// or malformed.
func topLevelString(raw []byte, key string) string {
	var v [1][]byte
	if !Members(raw, []string{key}, v[:]) || len(v[0]) == 0 || v[0][0] != '"' {
		return ""
	}
	s, err := (&scanner{b: v[0]}).str()
	if err != nil {
		return ""
	}
	return s
}

// Members finds the top-level members of the JSON object raw named in keys
// without decoding anything: out[i] is set to the raw JSON value of the
// member keys[i] (the last one when a key repeats, as encoding/json
// reads it) and left nil when absent. Keys match exactly. It reports
// false, leaving out as far as it got, when raw is not a well-formed JSON
// object. out must be as long as keys.
func Members(raw []byte, keys []string, out [][]byte) bool {
	s := &scanner{b: raw}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		return true
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		end, plain, err := s.stringEnd()
		if err != nil {
			return false
		}
		var k string
		if plain {
			// Compared without a copy: keys are ASCII.
			kb := s.b[s.i+1 : end-1]
			k = ""
			for _, want := range keys {
				if string(kb) == want {
					k = want
					break
				}
			}
			s.i = end
		} else if k, err = s.str(); err != nil {
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		start := s.i
		if err := s.skip(); err != nil {
			return false
		}
		if k != "" {
			for j, want := range keys {
				if k == want {
					out[j] = s.b[start:s.i]
				}
			}
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		if s.b[s.i] == '}' {
			s.i++
			s.ws()
			return s.i == len(s.b)
		}
		if s.b[s.i] != ',' {
			return false
		}
		s.i++
	}
}

// OrderKey returns the key an event is ordered by: its minion (MinionOf),
// else its tag. Events of one key are handled one at a time, in order: on
// one lane of a daemon, and with --partitions on one partition of the
// stream, whose publishers put a hash of the key into the subject.
func OrderKey(tag string, rawData []byte) string {
	if id := MinionOf(tag, rawData); id != "" {
		return id
	}
	return tag
}

// EnvelopeOrderKey is OrderKey of a JSON envelope (`{"tag", "data"}`);
// fallback (the tag the envelope is published under) when the envelope is
// malformed.
func EnvelopeOrderKey(body []byte, fallback string) string {
	tag, raw, err := SplitEnvelope(body)
	if err != nil {
		return fallback
	}
	return OrderKey(tag, raw)
}
