package store

import (
	"encoding/json"
	"strings"
	"time"
)

// findJob is the function Salt's master publishes to poll running jobs
// (every gather_job_timeout while a job runs): noise in an event archive.
const findJob = "saltutil.find_job"

// Classify turns a Salt event into the job and return records Salt's master
// job cache would store, and tells whether the event itself is worth
// archiving:
//
//   - salt/job/<jid>/new gives a Job (the load is the event data, the time
//     its "_stamp");
//   - salt/job/<jid>/ret/<minion> gives a Return (fun, success, which
//     defaults to true when absent, return and the whole data as full_ret);
//   - every other event gives no record.
//
// keep is false, unless keepAll, for the publishes and returns of
// saltutil.find_job (their records are still returned: Salt's job cache
// stores them too, and its readers filter them out) and for Salt's legacy
// duplicates of a job publish: the event tagged with the bare 20-digit jid
// and the one tagged new_job.
//
// The records share data's bytes.
func Classify(tag string, data json.RawMessage, keepAll bool) (jobs []Job, returns []Return, keep bool) {
	if tag == "new_job" || isBareJID(tag) {
		return nil, nil, keepAll
	}
	rest, ok := strings.CutPrefix(tag, "salt/job/")
	if !ok {
		return nil, nil, true
	}
	jid, rest, ok := strings.Cut(rest, "/")
	if !ok || jid == "" {
		return nil, nil, true
	}
	var d struct {
		Fun     json.RawMessage `json:"fun"`
		Success json.RawMessage `json:"success"`
		Return  json.RawMessage `json:"return"`
		Stamp   json.RawMessage `json:"_stamp"`
	}
	// Data that is not an object still gives records: Salt would
	// store whatever the event carried.
	_ = json.Unmarshal(data, &d)
	fun := jsonString(d.Fun)
	var at time.Time
	if stamp := jsonString(d.Stamp); stamp != "" {
		at, _ = parseStamp(stamp)
	}
	keep = keepAll || fun != findJob
	switch {
	case rest == "new":
		return []Job{{JID: jid, Load: data, Time: at}}, nil, keep
	case strings.HasPrefix(rest, "ret/") && len(rest) > len("ret/"):
		success := true
		if v, ok := jsonBool(d.Success); ok {
			success = v
		}
		ret := Return{
			JID:      jid,
			MinionID: rest[len("ret/"):],
			Fun:      fun,
			Return:   d.Return,
			Success:  success,
			FullRet:  data,
			Time:     at,
		}
		return nil, []Return{ret}, keep
	}
	return nil, nil, true
}

// isBareJID reports whether tag is a bare Salt jid: 20 digits.
func isBareJID(tag string) bool {
	if len(tag) != 20 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		if tag[i] < '0' || tag[i] > '9' {
			return false
		}
	}
	return true
}

// jsonString returns the JSON string raw holds, or "".
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// jsonBool returns the JSON boolean raw holds.
func jsonBool(raw json.RawMessage) (bool, bool) {
	var b bool
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &b) != nil {
		return false, false
	}
	return b, true
}
