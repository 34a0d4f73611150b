package event

import "testing"

func TestParseJobTag(t *testing.T) {
	for _, c := range []struct {
		tag          string
		ok           bool
		kind, jid    string
		rest, minion string
		ret          bool
	}{
		{tag: "salt/job/20261126053737123456/new", ok: true, kind: "job", jid: "20261126053737123456", rest: "new"},
		{tag: "salt/job/20261126053737123456/ret/web1", ok: true, kind: "job", jid: "20261126053737123456", rest: "ret/web1", minion: "web1", ret: true},
		{tag: "salt/job/20261126053737123456/ret/web1.example.com", ok: true, kind: "job", jid: "20261126053737123456", rest: "ret/web1.example.com", minion: "web1.example.com", ret: true},
		{tag: "salt/job/20261126053737123456/ret/", ok: true, kind: "job", jid: "20261126053737123456", rest: "ret/"},
		{tag: "salt/job/20261126053737123456/prog/web1/0", ok: true, kind: "job", jid: "20261126053737123456", rest: "prog/web1/0"},
		{tag: "salt/run/20261126053737123456/ret", ok: true, kind: "run", jid: "20261126053737123456", rest: "ret", ret: true},
		{tag: "salt/run/20261126053737123456/new", ok: true, kind: "run", jid: "20261126053737123456", rest: "new"},
		{tag: "salt/wheel/20261126053737123456/ret", ok: true, kind: "wheel", jid: "20261126053737123456", rest: "ret", ret: true},
		{tag: "salt/run/20261126053737123456/ret/x", ok: true, kind: "run", jid: "20261126053737123456", rest: "ret/x"},
		{tag: "salt/job//ret/web1"},
		{tag: "salt/job/123"},
		{tag: "salt/minion/web1/start"},
		{tag: "salt/auth"},
		{tag: "myco/job/1/ret/web1"},
		{tag: "20261126053737123456"},
	} {
		jt, ok := ParseJobTag(c.tag)
		if ok != c.ok || jt.Kind != c.kind || jt.JID != c.jid || jt.Rest != c.rest {
			t.Errorf("ParseJobTag(%q) = %+v, %v; want {%s %s %s}, %v", c.tag, jt, ok, c.kind, c.jid, c.rest, c.ok)
			continue
		}
		if minion, ret := jt.Return(); ok && (minion != c.minion || ret != c.ret) {
			t.Errorf("%q: Return() = %q, %v; want %q, %v", c.tag, minion, ret, c.minion, c.ret)
		}
	}
}
