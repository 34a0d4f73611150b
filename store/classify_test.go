package store

import (
	"os"
	"reflect"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	const jid = "20250301120000123456"
	stamp := time.Date(2025, 3, 1, 11, 0, 0, 123456000, time.UTC)
	newData := `{"jid": "20250301120000123456", "fun": "state.apply", "arg": [], "tgt": "web*", "minions": ["web1"], "_stamp": "2025-03-01T11:00:00.123456"}`
	findJobNew := `{"jid": "20250301120000123456", "fun": "saltutil.find_job", "arg": ["20250301115959000000"], "_stamp": "2025-03-01T11:00:00.123456"}`
	retData := `{"fun": "state.apply", "jid": "20250301120000123456", "id": "web1", "return": {"a": 1}, "retcode": 0, "success": true, "_stamp": "2025-03-01T11:00:00.123456"}`
	retFailed := `{"fun": "state.apply", "id": "web1", "return": "error", "retcode": 1, "success": false}`
	retNoSuccess := `{"fun": "test.ping", "id": "web1", "return": true}`
	retNullSuccess := `{"fun": "test.ping", "id": "web1", "return": true, "success": null}`
	findJobRet := `{"fun": "saltutil.find_job", "id": "web1", "return": {}, "success": true}`
	// Recorded from Salt 3007.1 (testdata/salt/3007.1/jobs), with the jid
	// and stamps changed.
	runnerNew := `{"fun": "runner.test.arg", "jid": "20250301120000123456", "user": "root", "fun_args": ["x"], "_stamp": "2025-03-01T11:00:00.000001"}`
	runnerRet := `{"fun": "runner.test.arg", "jid": "20250301120000123456", "user": "root", "fun_args": ["x"], "_stamp": "2025-03-01T11:00:00.123456", "return": {"args": ["x"], "kwargs": {}}, "success": true}`
	runnerFailed := `{"fun": "runner.state.orchestrate", "jid": "20250301120000123456", "user": "root", "fun_args": ["nonexistent_sls"], "return": {"data": {"vm_master": ["No matching sls found for 'nonexistent_sls' in env 'base'"]}, "outputter": "highstate", "retcode": 1}, "success": false}`
	runnerUnavailable := `{"success": false, "return": "'test.raise_exception?' is not available.", "retcode": 254, "fun": "test.raise_exception?", "fun_args": [], "jid": "20250301120000123456", "_stamp": "2025-03-01T11:00:00.123456"}`
	wheelRet := `{"fun": "wheel.key.list_all", "jid": "20250301120000123456", "user": "UNKNOWN", "fun_args": [], "return": {"minions": ["web1", "web2"]}, "success": true}`
	wheelMasterCall := `{"fun": "wheel.key.list_all", "jid": "20250301120000123456", "tag": "salt/wheel/20250301120000123456", "user": "root", "return": {"minions": ["web1", "web2"]}, "success": true}`
	saltCallRet := `{"cmd": "_return", "id": "web1", "jid": "20250301120000123456", "return": "hello", "retcode": 0, "fun": "test.echo", "fun_args": ["hello"], "arg": ["hello"], "tgt_type": "glob", "tgt": "web1", "_stamp": "2025-03-01T11:00:00.123456"}`
	// Shaped like the find_job job of testdata/salt/3007.1/list_jobs.json
	// (the master polling job 20261123101734682518 on web2), whose events
	// the recordings do not hold.
	const findJID = "20261123101739728027"
	findJobListNew := `{"jid": "20261123101739728027", "tgt_type": "list", "tgt": ["web2"], "user": "root", "fun": "saltutil.find_job", "arg": ["20261123101734682518"], "minions": ["web2"], "missing": [], "_stamp": "2026-11-23T10:17:39.728027"}`
	findJobRunning := `{"cmd": "_return", "id": "web2", "success": true, "return": {"fun": "test.ping", "jid": "20261123101734682518", "pid": 4242, "tgt": ["web1", "web2"], "tgt_type": "list", "user": "root"}, "retcode": 0, "jid": "20261123101739728027", "fun": "saltutil.find_job", "fun_args": ["20261123101734682518"], "_stamp": "2026-11-23T10:17:39.812345"}`
	for _, tc := range []struct {
		name    string
		tag     string
		data    string
		keepAll bool
		jobs    []Job
		returns []Return
		keep    bool
	}{
		{name: "job publish", tag: "salt/job/" + jid + "/new", data: newData,
			jobs: []Job{{JID: jid, Load: raw(newData), Time: stamp}}, keep: true},
		{name: "job publish without _stamp", tag: "salt/job/" + jid + "/new", data: `{"fun": "test.ping"}`,
			jobs: []Job{{JID: jid, Load: raw(`{"fun": "test.ping"}`)}}, keep: true},
		{name: "return", tag: "salt/job/" + jid + "/ret/web1", data: retData,
			returns: []Return{{JID: jid, MinionID: "web1", Fun: "state.apply", Return: raw(`{"a": 1}`), Success: true, FullRet: raw(retData), Time: stamp}}, keep: true},
		{name: "failed return", tag: "salt/job/" + jid + "/ret/web1", data: retFailed,
			returns: []Return{{JID: jid, MinionID: "web1", Fun: "state.apply", Return: raw(`"error"`), Success: false, FullRet: raw(retFailed)}}, keep: true},
		{name: "success absent", tag: "salt/job/" + jid + "/ret/web1", data: retNoSuccess,
			returns: []Return{{JID: jid, MinionID: "web1", Fun: "test.ping", Return: raw(`true`), Success: true, FullRet: raw(retNoSuccess)}}, keep: true},
		{name: "success null", tag: "salt/job/" + jid + "/ret/web1", data: retNullSuccess,
			returns: []Return{{JID: jid, MinionID: "web1", Fun: "test.ping", Return: raw(`true`), Success: true, FullRet: raw(retNullSuccess)}}, keep: true},
		{name: "minion id with dots", tag: "salt/job/" + jid + "/ret/web1.example.com", data: `{"fun": "test.ping", "return": true}`,
			returns: []Return{{JID: jid, MinionID: "web1.example.com", Fun: "test.ping", Return: raw(`true`), Success: true, FullRet: raw(`{"fun": "test.ping", "return": true}`)}}, keep: true},
		{name: "return data not an object", tag: "salt/job/" + jid + "/ret/web1", data: `[1]`,
			returns: []Return{{JID: jid, MinionID: "web1", Success: true, FullRet: raw(`[1]`)}}, keep: true},
		{name: "find_job publish", tag: "salt/job/" + jid + "/new", data: findJobNew, keep: false},
		{name: "find_job publish, keep all", tag: "salt/job/" + jid + "/new", data: findJobNew, keepAll: true,
			jobs: []Job{{JID: jid, Load: raw(findJobNew), Time: stamp}}, keep: true},
		{name: "find_job return", tag: "salt/job/" + jid + "/ret/web1", data: findJobRet, keep: false},
		{name: "find_job return, keep all", tag: "salt/job/" + jid + "/ret/web1", data: findJobRet, keepAll: true,
			returns: []Return{{JID: jid, MinionID: "web1", Fun: "saltutil.find_job", Return: raw(`{}`), Success: true, FullRet: raw(findJobRet)}}, keep: true},
		{name: "find_job publish to a list", tag: "salt/job/" + findJID + "/new", data: findJobListNew, keep: false},
		{name: "find_job return of a running job", tag: "salt/job/" + findJID + "/ret/web2", data: findJobRunning, keep: false},
		{name: "find_job return of a running job, keep all", tag: "salt/job/" + findJID + "/ret/web2", data: findJobRunning, keepAll: true,
			returns: []Return{{JID: findJID, MinionID: "web2", Fun: "saltutil.find_job", Return: raw(`{"fun": "test.ping", "jid": "20261123101734682518", "pid": 4242, "tgt": ["web1", "web2"], "tgt_type": "list", "user": "root"}`),
				Success: true, FullRet: raw(findJobRunning), Time: time.Date(2026, 11, 23, 10, 17, 39, 812345000, time.UTC)}}, keep: true},
		{name: "legacy bare jid", tag: jid, data: newData, keep: false},
		{name: "legacy bare jid, keep all", tag: jid, data: newData, keepAll: true, keep: true},
		{name: "legacy new_job", tag: "new_job", data: newData, keep: false},
		{name: "legacy new_job, keep all", tag: "new_job", data: newData, keepAll: true, keep: true},
		{name: "19 digits", tag: "2025030112000012345", data: `{}`, keep: true},
		{name: "21 digits", tag: "202503011200001234567", data: `{}`, keep: true},
		{name: "progress", tag: "salt/job/" + jid + "/prog/web1/0", data: `{"fun": "state.apply"}`, keep: true},
		{name: "return without minion", tag: "salt/job/" + jid + "/ret/", data: retData, keep: true},
		{name: "job without kind", tag: "salt/job/" + jid, data: `{}`, keep: true},
		{name: "new with a suffix", tag: "salt/job/" + jid + "/new/x", data: `{}`, keep: true},
		{name: "minion start", tag: "salt/minion/web1/start", data: `{"id": "web1"}`, keep: true},
		{name: "runner start", tag: "salt/run/" + jid + "/new", data: runnerNew, keep: true},
		{name: "runner return", tag: "salt/run/" + jid + "/ret", data: runnerRet,
			jobs:    []Job{{JID: jid, Load: raw(`{"fun":"runner.test.arg","id":"vm_master","jid":"20250301120000123456","tgt":"vm_master","user":"root"}`)}},
			returns: []Return{{JID: jid, MinionID: "vm_master", Fun: "runner.test.arg", Return: raw(runnerRet), Success: true, FullRet: raw(runnerRet), Time: stamp}}, keep: true},
		{name: "failed runner return", tag: "salt/run/" + jid + "/ret", data: runnerFailed,
			jobs:    []Job{{JID: jid, Load: raw(`{"fun":"runner.state.orchestrate","id":"vm_master","jid":"20250301120000123456","tgt":"vm_master","user":"root"}`)}},
			returns: []Return{{JID: jid, MinionID: "vm_master", Fun: "runner.state.orchestrate", Return: raw(runnerFailed), Success: false, FullRet: raw(runnerFailed)}}, keep: true},
		{name: "runner salt-run could not load", tag: "salt/run/" + jid + "/ret", data: runnerUnavailable, keep: true},
		{name: "wheel return", tag: "salt/wheel/" + jid + "/ret", data: wheelRet,
			jobs:    []Job{{JID: jid, Load: raw(`{"fun":"wheel.key.list_all","id":"vm_master","jid":"20250301120000123456","tgt":"vm_master","user":"UNKNOWN"}`)}},
			returns: []Return{{JID: jid, MinionID: "vm_master", Fun: "wheel.key.list_all", Return: raw(wheelRet), Success: true, FullRet: raw(wheelRet)}}, keep: true},
		{name: "master's wheel call", tag: "salt/wheel/" + jid + "/ret", data: wheelMasterCall, keep: true},
		{name: "wheel tag, runner function", tag: "salt/wheel/" + jid + "/ret", data: runnerRet, keep: true},
		{name: "salt-call return", tag: "salt/job/" + jid + "/ret/web1", data: saltCallRet,
			jobs:    []Job{{JID: jid, Load: raw(`{"_stamp":"2025-03-01T11:00:00.123456","arg":["hello"],"cmd":"_return","fun":"test.echo","fun_args":["hello"],"id":"web1","jid":"20250301120000123456","retcode":0,"tgt":"web1","tgt_type":"glob"}`), Time: stamp}},
			returns: []Return{{JID: jid, MinionID: "web1", Fun: "test.echo", Return: raw(`"hello"`), Success: true, FullRet: raw(saltCallRet), Time: stamp}}, keep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs, returns, keep := Classify(tc.tag, raw(tc.data), "vm_master", tc.keepAll)
			if !reflect.DeepEqual(jobs, tc.jobs) {
				t.Errorf("jobs:\n got %+v\nwant %+v", jobs, tc.jobs)
				for i := range jobs {
					t.Logf("load %d: %s", i, jobs[i].Load)
				}
			}
			if !reflect.DeepEqual(returns, tc.returns) {
				t.Errorf("returns:\n got %+v\nwant %+v", returns, tc.returns)
			}
			if keep != tc.keep {
				t.Errorf("keep = %v, want %v", keep, tc.keep)
			}
		})
	}
}

func TestClassifyDefaultMasterID(t *testing.T) {
	_, rets, _ := Classify("salt/run/20250301120000123456/ret", raw(`{"fun": "runner.test.ping", "user": "root", "return": true}`), "", false)
	host, _ := os.Hostname()
	if len(rets) != 1 || rets[0].MinionID != host+"_master" || DefaultMasterID() != host+"_master" {
		t.Errorf("returns = %+v, want the master id %s_master", rets, host)
	}
}
