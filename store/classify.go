package store

import (
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/reactord/reactord/event"
)

// findJob is the function Salt's master publishes to poll running jobs
// (every gather_job_timeout while a job runs): noise in an event archive.
const findJob = "saltutil.find_job"

// classifyKeys are the members of an event's data Classify reads.
var classifyKeys = [...]string{"fun", "success", "return", "_stamp", "tgt", "user", "tag"}

// Classify turns a Salt event into the job and return records Salt's master
// job cache (local_cache, or the mysql and pgjsonb returners as
// master_job_cache) would store, and tells whether the event itself is worth
// archiving:
//
//   - salt/job/<jid>/new gives a Job (the load is the event data, the time
//     its "_stamp");
//   - salt/job/<jid>/ret/<minion> gives a Return (fun, success, which
//     defaults to true when absent, return and the whole data as full_ret).
//     The return of a standalone job (salt-call, whose master gives it its
//     jid and never publishes it) carries the job's tgt: it also gives the
//     Job, with that data, less its return, as the load;
//   - salt/run/<jid>/ret and salt/wheel/<jid>/ret of a runner or wheel
//     function run by Salt's client mixin (salt-run, salt-api runner and
//     wheel_async clients, reactor runner and wheel reactions, orchestrate)
//     give the Job and the Return Salt's master stores when such a function
//     ends: the job targets masterID (Salt's master id, its "id" option,
//     which defaults to the host name followed by "_master") and is that
//     minion's only return, whose return is the whole event data. The /new
//     events of such jobs give no record: Salt stores these jobs only when
//     they end. The events of the master's own wheel calls (the synchronous
//     salt-api wheel client, which carry a "tag") and of runner functions
//     salt-run could not start give no record either: Salt does not store
//     them;
//   - every other event gives no record.
//
// Unless keepAll, the publishes and returns of saltutil.find_job (the
// master polling running jobs) give no record and keep is false: Salt's job
// cache stores them, but Salt operators' audit scripts skip them, so they
// stay out of jids and salt_returns as well as of the event archive. keep is
// also false, unless keepAll, for Salt's legacy duplicates of a job publish:
// the event tagged with the bare 20-digit jid and the one tagged new_job.
//
// The records share data's bytes, except the loads Classify builds.
func Classify(tag string, data json.RawMessage, masterID string, keepAll bool) (jobs []Job, returns []Return, keep bool) {
	if tag == "new_job" || isBareJID(tag) {
		return nil, nil, keepAll
	}
	jt, ok := event.ParseJobTag(tag)
	if !ok {
		return nil, nil, true
	}
	kind, jid, rest := jt.Kind, jt.JID, jt.Rest
	var m [len(classifyKeys)][]byte
	// Data that is not an object still gives records: Salt would
	// store whatever the event carried.
	if !event.Members(data, classifyKeys[:], m[:]) {
		m = [len(classifyKeys)][]byte{}
	}
	d := struct{ Fun, Success, Return, Stamp, Tgt, User, Tag json.RawMessage }{
		Fun: m[0], Success: m[1], Return: m[2], Stamp: m[3], Tgt: m[4], User: m[5], Tag: m[6]}
	fun := jsonString(d.Fun)
	var at time.Time
	if stamp := jsonString(d.Stamp); stamp != "" {
		at, _ = parseStamp(stamp)
	}
	success := true
	if v, ok := jsonBool(d.Success); ok {
		success = v
	}
	if kind != "job" {
		if rest != "ret" || d.Tag != nil || !strings.HasPrefix(fun, clientPrefix[kind]) {
			return nil, nil, true
		}
		if masterID == "" {
			masterID = DefaultMasterID()
		}
		load := clientLoad(masterID, jid, d.Fun, d.User)
		ret := Return{JID: jid, MinionID: masterID, Fun: fun, Return: data, Success: success, FullRet: data, Time: at}
		return []Job{{JID: jid, Load: load}}, []Return{ret}, true
	}
	if fun == findJob && !keepAll {
		return nil, nil, false
	}
	keep = true
	if rest == "new" {
		return []Job{{JID: jid, Load: data, Time: at}}, nil, keep
	}
	if minion, ok := jt.Return(); ok {
		ret := Return{
			JID:      jid,
			MinionID: minion,
			Fun:      fun,
			Return:   d.Return,
			Success:  success,
			FullRet:  data,
			Time:     at,
		}
		if len(d.Tgt) > 0 {
			jobs = []Job{{JID: jid, Load: withoutKey(data, "return"), Time: at}}
		}
		return jobs, []Return{ret}, keep
	}
	return nil, nil, true
}

// clientPrefix is how the function names of runner and wheel jobs begin,
// by the kind of their tag (salt/run/..., salt/wheel/...).
var clientPrefix = map[string]string{"run": "runner.", "wheel": "wheel."}

// ClientKind returns the kind of tag ("run" for salt/run/..., "wheel" for
// salt/wheel/...) of a runner or wheel job whose function is fun
// ("runner.x", "wheel.x"), and "" for any other function. Backends use it
// to read such jobs back as Salt's master stored them.
func ClientKind(fun string) string {
	for kind, prefix := range clientPrefix {
		if strings.HasPrefix(fun, prefix) {
			return kind
		}
	}
	return ""
}

// clientLoad is the load Salt's master stores for a runner or wheel job
// (less the return, which Salt keeps in it too): the master is both the
// job's id and its target, and the load has no arguments and no target
// type.
func clientLoad(masterID, jid string, fun, user json.RawMessage) json.RawMessage {
	load := map[string]any{"id": masterID, "tgt": masterID, "jid": jid}
	if len(fun) > 0 {
		load["fun"] = fun
	}
	if len(user) > 0 {
		load["user"] = user
	}
	b, _ := json.Marshal(load)
	return b
}

// withoutKey returns the JSON object data without its key (data itself
// when it is not an object or has no such key).
func withoutKey(data json.RawMessage, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || m == nil {
		return data
	}
	if _, ok := m[key]; !ok {
		return data
	}
	delete(m, key)
	b, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return b
}

// DefaultMasterID returns the id Salt's master takes when its configuration
// sets none: the host name followed by "_master". It asks the system each
// time (the daemon asks once, for its --master-id default).
func DefaultMasterID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "_master"
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
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && plainJSONString(raw[1:len(raw)-1]) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// plainJSONString reports whether b, the inside of a JSON string, is
// printable ASCII without escapes or quotes: its text is itself.
func plainJSONString(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

// jsonBool returns the JSON boolean raw holds.
func jsonBool(raw json.RawMessage) (bool, bool) {
	var b bool
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &b) != nil {
		return false, false
	}
	return b, true
}
