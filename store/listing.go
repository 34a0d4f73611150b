package store

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Listing is a job as salt-run jobs.list_jobs shows it. Its JSON has the
// keys and key order of Salt's (Function, Arguments, Target, Target-type,
// User, Metadata when the job has any, StartTime).
type Listing struct {
	// Function is the load's fun, "unknown-function" when it has none.
	Function json.RawMessage `json:"Function"`
	// Arguments are the load's arg, none when it has none.
	Arguments []json.RawMessage `json:"Arguments"`
	// Target is the load's tgt, "unknown-target" when it has none.
	Target json.RawMessage `json:"Target"`
	// TargetType is the load's tgt_type, "list" when it has none (as for
	// runner, wheel and standalone jobs).
	TargetType json.RawMessage `json:"Target-type"`
	// User is the load's user, "root" when it has none.
	User json.RawMessage `json:"User"`
	// Metadata is the load's metadata, else the metadata of its kwargs;
	// absent when it has neither.
	Metadata json.RawMessage `json:"Metadata,omitempty"`
	// StartTime is the time the jid encodes, formatted as Salt's
	// jid_to_time does ("2026, Nov 23 10:12:15.710850", the master's local
	// time); empty for a jid that is not a time.
	StartTime string `json:"StartTime"`
}

// Listing returns j as salt-run jobs.list_jobs shows it: the fields of its
// load, with Salt's defaults, and the start time its jid encodes.
func (j Job) Listing() Listing {
	var load map[string]json.RawMessage
	if json.Unmarshal(j.Load, &load) != nil {
		load = nil
	}
	get := func(key, def string) json.RawMessage {
		if v, ok := load[key]; ok {
			return v
		}
		b, _ := json.Marshal(def)
		return b
	}
	l := Listing{
		Function:   get("fun", "unknown-function"),
		Arguments:  pyList(load["arg"]),
		Target:     get("tgt", "unknown-target"),
		TargetType: get("tgt_type", "list"),
		User:       get("user", "root"),
		StartTime:  JIDTime(j.JID),
	}
	if v, ok := load["metadata"]; ok {
		l.Metadata = v
	} else if kw, ok := load["kwargs"]; ok {
		var kwargs map[string]json.RawMessage
		if json.Unmarshal(kw, &kwargs) == nil {
			if v, ok := kwargs["metadata"]; ok {
				l.Metadata = v
			}
		}
	}
	if l.Metadata != nil && bytes.Equal(bytes.TrimSpace(l.Metadata), []byte("null")) {
		// A null would vanish under omitempty; keep it, as Salt does.
		l.Metadata = json.RawMessage("null")
	}
	return l
}

// pyList is Python's list() of a JSON value, as Salt applies it to a load's
// arg: the elements of an array, the keys of an object, the characters of
// a string, none for an absent or null value (and for anything else).
func pyList(v json.RawMessage) []json.RawMessage {
	out := []json.RawMessage{}
	if len(v) == 0 {
		return out
	}
	var arr []json.RawMessage
	if json.Unmarshal(v, &arr) == nil && arr != nil {
		return append(out, arr...)
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		for _, r := range s {
			b, _ := json.Marshal(string(r))
			out = append(out, b)
		}
		return out
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	if t, err := dec.Token(); err == nil && t == json.Delim('{') {
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				break
			}
			b, _ := json.Marshal(k)
			out = append(out, b)
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				break
			}
		}
	}
	return out
}

// months are the month names of Salt's jid_to_time (Python's
// calendar.month_abbr in the C locale, whose month 0 is "").
var months = [...]string{"", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// JIDTime formats the time a Salt jid encodes as Salt's jid_to_time does:
// "YYYY, Mon DD hh:mm:ss.ffffff", the digits taken as they are (the master's
// local time). It returns "" for a jid that is neither 20 characters nor 20
// followed by Salt's unique_jid suffix "_<pid>", or whose month is not a
// number up to 12 (on which Salt's list_jobs fails).
func JIDTime(jid string) string {
	if len(jid) != 20 && (len(jid) <= 21 || jid[20] != '_') {
		return ""
	}
	if !utf8.ValidString(jid[:20]) {
		return ""
	}
	m, err := strconv.Atoi(jid[4:6])
	if err != nil || m < 0 || m > 12 {
		return ""
	}
	return jid[:4] + ", " + months[m] + " " + jid[6:8] + " " + jid[8:10] + ":" + jid[10:12] + ":" + jid[12:14] + "." + jid[14:20]
}
