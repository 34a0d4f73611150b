package guard

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestAwaitDispatch: an event that may be a consequence of a reaction's
// dispatch in flight waits for the dispatch's Done, and Held then judges
// it with the job the dispatch started; other events do not wait; a
// dispatch that never reports is waited for DispatchWait at most.
func TestAwaitDispatch(t *testing.T) {
	revert := Reaction{Rule: "r1", ID: "revert"}
	other := Reaction{Rule: "r2", ID: "other"}
	const jid = "20260101000000000001"
	local := InFlight{EventID: "ev-1", Reaction: revert, Kind: "local", Targets: []string{"web1"}}
	cases := []struct {
		name   string
		f      InFlight
		r      Reaction
		mode   string
		tag    string
		minion string
		before bool   // the event was in hand before the dispatch began
		event  string // the awaiting event's id (default ev-2)
		wait   bool
		held   string // the evidence Held gives after the wait ("": not held)
	}{
		{name: "a beacon of the target waits and is held", f: local, r: revert, tag: "salt/beacon/web1/inotify//etc/f", minion: "web1", wait: true, held: EvidenceBeacon},
		{name: "a start of the target waits and is held", f: local, r: revert, tag: "salt/minion/web1/start", minion: "web1", wait: true, held: EvidenceMinionStart},
		{name: "the job's return waits and is held", f: local, r: revert, tag: "salt/job/" + jid + "/ret/web1", minion: "web1", wait: true, held: EvidenceJob},
		{name: "a beacon of another minion does not wait", f: local, r: revert, tag: "salt/beacon/web2/inotify//etc/f", minion: "web2"},
		{name: "another reaction does not wait", f: local, r: other, tag: "salt/beacon/web1/inotify//etc/f", minion: "web1"},
		{name: "an event in hand before the dispatch does not wait", f: local, r: revert, tag: "salt/beacon/web1/inotify//etc/f", minion: "web1", before: true},
		{name: "the dispatch's own event does not wait", f: local, r: revert, tag: "salt/beacon/web1/inotify//etc/f", minion: "web1", event: "ev-1"},
		{name: "a custom event does not wait", f: local, r: revert, tag: "myco/deploy", minion: "web1"},
		{name: "a custom event waits in guard: minion", f: local, r: revert, mode: ModeMinion, tag: "myco/deploy", minion: "web1", wait: true, held: EvidenceMinion},
		{name: "nothing waits in guard: off", f: local, r: revert, mode: ModeOff, tag: "salt/beacon/web1/inotify//etc/f", minion: "web1"},
		{name: "a local job's return from another minion does not wait", f: local, r: revert, tag: "salt/job/" + jid + "/ret/web2", minion: "web2"},
		{name: "a runner's job events are not a local job's", f: local, r: revert, tag: "salt/run/" + jid + "/ret"},
		{name: "a runner's own return waits and is held", f: InFlight{EventID: "ev-1", Reaction: revert, Kind: "runner", Targets: []string{"web1"}},
			r: revert, tag: "salt/run/" + jid + "/ret", wait: true, held: EvidenceJob},
		{name: "a glob target: any minion's beacon waits", f: InFlight{EventID: "ev-1", Reaction: revert, Kind: "local"}, r: revert,
			tag: "salt/beacon/web9/inotify//etc/f", minion: "web9", wait: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Options{Settle: time.Second, JobTimeout: time.Minute})
				if c.mode == "" {
					c.mode = ModeBeacons
				}
				if c.event == "" {
					c.event = "ev-2"
				}
				in := time.Now()
				if c.before {
					time.Sleep(time.Millisecond)
				}
				c.f.At = time.Now()
				d := g.Dispatching(c.f)
				answered := make(chan struct{})
				defer func() { <-answered }()
				go func() {
					defer close(answered)
					time.Sleep(3 * time.Second) // the driver's answer
					g.Started(c.f.EventID, c.f.Reaction, jid, []string{"web1"}, time.Now())
					d.Done()
				}()
				ev := EventOf(c.tag, c.minion, time.Now())
				if c.before {
					ev.At = in
				}
				start := time.Now()
				if err := g.Await(context.Background(), c.event, c.r, c.mode, ev); err != nil {
					t.Fatal(err)
				}
				if waited := time.Since(start) > 0; waited != c.wait {
					t.Fatalf("waited %v, want %v", time.Since(start), c.wait)
				}
				if !c.wait {
					return
				}
				h, held := g.Held(c.r, c.mode, ev)
				if (c.held != "") != held || h.Evidence != c.held {
					t.Fatalf("held %v on %q, want %q", held, h.Evidence, c.held)
				}
			})
		})
	}
}

// TestAwaitBounded: a dispatch that never reports is waited for
// DispatchWait, then given up (ErrDispatchWait); a fired event waits for
// the dispatch firing its tag (AwaitFired), then finds its hop count.
func TestAwaitBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Options{DispatchWait: 10 * time.Second})
		r := Reaction{Rule: "r1", ID: "again"}
		g.Dispatching(InFlight{EventID: "ev-1", Reaction: r, Kind: "local", Targets: []string{"web1"}, At: time.Now()})
		start := time.Now()
		err := g.Await(context.Background(), "ev-2", r, ModeBeacons, EventOf("salt/beacon/web1/x", "web1", time.Now()))
		if !errors.Is(err, ErrDispatchWait) || time.Since(start) != 10*time.Second {
			t.Fatalf("after %v: %v, want %v after 10s", time.Since(start), err, ErrDispatchWait)
		}

		d := g.Dispatching(InFlight{EventID: "ev-3", Reaction: r, Kind: "runner", Fires: "myco/loop", At: time.Now()})
		go func() {
			time.Sleep(2 * time.Second)
			g.ExpectEvent("myco/loop", Fired{Hop: 2, Cause: "myco/loop", By: r}, time.Now())
			d.Done()
		}()
		start = time.Now()
		if err := g.AwaitFired(context.Background(), "myco/loop", time.Now()); err != nil {
			t.Fatal(err)
		}
		if f := g.HopOf("myco/loop", time.Now()); time.Since(start) != 2*time.Second || f.Hop != 2 || f.By != r {
			t.Fatalf("after %v: fired %+v, want hop 2 by %v after 2s", time.Since(start), f, r)
		}
		if err := g.AwaitFired(context.Background(), "myco/other", time.Now()); err != nil {
			t.Fatal(err)
		}
	})
}
