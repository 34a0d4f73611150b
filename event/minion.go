package event

import "strings"

// MinionOf returns the minion an event is about, for ordering: the id in
// salt/job/<jid>/ret/<id>, salt/minion/<id>/..., salt/beacon/<id>/...,
// else the top-level "id" string of the raw data, else "".
func MinionOf(tag string, rawData []byte) string {
	switch {
	case strings.HasPrefix(tag, "salt/job/"):
		rest := tag[len("salt/job/"):]
		if _, after, ok := strings.Cut(rest, "/ret/"); ok {
			return after
		}
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
// decoding the rest; "" when absent, not a string, or malformed.
func topLevelString(raw []byte, key string) string {
	s := &scanner{b: raw}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return ""
	}
	s.i++
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return ""
		}
		k, err := s.str()
		if err != nil {
			return ""
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return ""
		}
		s.i++
		s.ws()
		if k == key {
			if s.i < len(s.b) && s.b[s.i] == '"' {
				v, err := s.str()
				if err != nil {
					return ""
				}
				return v
			}
			return ""
		}
		if err := s.skip(); err != nil {
			return ""
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ',' {
			return ""
		}
		s.i++
	}
}
