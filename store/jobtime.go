package store

import (
	"encoding/json"
	"time"
)

// parseStamp parses a Salt "_stamp" (UTC, with or without a fraction or a
// zone).
func parseStamp(s string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02T15:04:05", time.RFC3339Nano, "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// jidLayout is the layout of a Salt jid without its six digits of
// microseconds: salt.utils.jid.gen_jid formats datetime.now() (or utcnow()
// with utc_jid) as %Y%m%d%H%M%S%f.
const jidLayout = "20060102150405"

// jidTime parses the time a Salt jid encodes, in the local time zone. It
// reports false for jids that are not 20 digits (optionally followed by
// Salt's unique_jid suffix "_<pid>").
func jidTime(jid string) (time.Time, bool) {
	if len(jid) < 20 || (len(jid) > 20 && jid[20] != '_') {
		return time.Time{}, false
	}
	for i := 0; i < 20; i++ {
		if jid[i] < '0' || jid[i] > '9' {
			return time.Time{}, false
		}
	}
	t, err := time.ParseInLocation(jidLayout, jid[:14], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	var us int
	for _, c := range jid[14:20] {
		us = us*10 + int(c-'0')
	}
	return t.Add(time.Duration(us) * time.Microsecond), true
}

// JobTime returns when a job was published, as Job.Time reads back: its
// load's "_stamp", else the time its jid encodes (in the local time zone),
// else zero. Backends use it for the jobs they read.
func JobTime(jid string, load []byte) time.Time {
	var s struct {
		Stamp json.RawMessage `json:"_stamp"`
	}
	if json.Unmarshal(load, &s) == nil && len(s.Stamp) > 0 {
		var str string
		if json.Unmarshal(s.Stamp, &str) == nil {
			if t, ok := parseStamp(str); ok {
				return t
			}
		}
	}
	t, _ := jidTime(jid)
	return t
}
