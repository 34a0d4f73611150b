package main

import (
	"strings"
	"testing"
)

// TestStubsOffline: a reaction file that calls salt['pillar.get'] renders
// without a master when --stubs answers the call, through render, check
// --events and explain (the daemon's --dry-run: TestStubsDryRun); without
// it, render says no driver reaches the master.
func TestStubsOffline(t *testing.T) {
	t.Parallel()
	const dir = "../../examples/reactor/accept-keys-from-pillar/"
	stubs := dir + "reactions_test.yaml"
	ev := dir + "events/pend-web1.json"
	code, out, errOut := runBin(t, nil, "render", "-c", dir+"reactor.conf", "--event", ev, "--stubs", stubs)
	if code != exitOK || !strings.Contains(out, `"fun": "key.accept"`) {
		t.Fatalf("render --stubs: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runBin(t, nil, "render", "-c", dir+"reactor.conf", "--event", ev)
	if code != exitFound || strings.Contains(out, "key.accept") || !strings.Contains(errOut, "pillar.get") {
		t.Fatalf("render without --stubs: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runBin(t, nil, "check", "-c", dir+"reactor.conf", "--offline", "--events", ev, "--stubs", stubs)
	if code != exitOK || !strings.Contains(out, "1 event(s) rendered") {
		t.Fatalf("check --events --stubs: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runBin(t, nil, "explain", "-c", dir+"reactor.conf", "--event", ev, "--stubs", stubs)
	if code != exitOK || !strings.Contains(out, "key.accept") {
		t.Fatalf("explain --stubs: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runBin(t, nil, "render", "-c", dir+"reactor.conf", "--event", ev, "--stubs", dir+"nosuch.yaml")
	if code != exitUsage || !strings.Contains(errOut, "nosuch.yaml") {
		t.Fatalf("render --stubs with a missing file: exit %d\n%s", code, errOut)
	}
}

// TestStubsDryRun: a --dry-run daemon answers the files' Salt calls from
// --stubs, and --stubs without --dry-run is refused before anything starts.
func TestStubsDryRun(t *testing.T) {
	const dir = "../../examples/reactor/accept-keys-from-pillar/"
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	listen := freeAddr(t)
	p := startDaemon(t, "-c", dir+"reactor.conf", "--dry-run", "--listen", listen, "--stubs", dir+"reactions_test.yaml", "--data-dir", "")
	code, _, errOut := runBin(t, nil, "fire", "--nats", "nats://"+listen, "salt/auth", `{"act": "pend", "id": "web1", "result": true}`)
	if code != exitOK {
		t.Fatalf("fire: exit %d, %s", code, errOut)
	}
	if tag := readReaction(t, p); tag != "salt/auth" {
		t.Fatalf("reaction to %s", tag)
	}
	code, _, errOut = runBin(t, nil, "-c", dir+"reactor.conf", "--driver", "exec", "--stubs", dir+"reactions_test.yaml")
	if code != exitUsage || !strings.Contains(errOut, "--stubs") {
		t.Fatalf("--stubs without --dry-run: exit %d\n%s", code, errOut)
	}
}
