package natsbus_test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/internal/freeport"
	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

func TestParseVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want natsbus.Version
		bad  bool
	}{
		{in: "2.12.3", want: natsbus.Version{Major: 2, Minor: 12, Patch: 3}},
		{in: "v2.11.0-RC.2", want: natsbus.Version{Major: 2, Minor: 11, Pre: "RC.2"}},
		{in: " 2.15.2 ", want: natsbus.Version{Major: 2, Minor: 15, Patch: 2}},
		{in: "2.12.3+x", want: natsbus.Version{Major: 2, Minor: 12, Patch: 3}},
		{in: "2.14.0-beta+build.7", want: natsbus.Version{Major: 2, Minor: 14, Pre: "beta"}},
		{in: "2.14.0-", bad: true},
		{in: "2.12", bad: true},
		{in: "", bad: true},
		{in: "2.x.1", bad: true},
	} {
		got, err := natsbus.ParseVersion(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// TestVersionLess: releases in order, a pre-release below its release
// and above the one before, pre-releases as semantic versioning orders
// them.
func TestVersionLess(t *testing.T) {
	t.Parallel()
	ordered := []string{"2.9.10", "2.10.29", "2.11.0-RC.1", "2.11.0-RC.2", "2.11.0-RC.10", "2.11.0", "2.12.3",
		"2.14.0-alpha", "2.14.0-alpha.1", "2.14.0-beta", "2.14.0", "2.14.1", "3.0.0"}
	for i, a := range ordered {
		va, err := natsbus.ParseVersion(a)
		if err != nil {
			t.Fatal(err)
		}
		if va.String() != a {
			t.Errorf("ParseVersion(%q).String() = %q", a, va)
		}
		for j, b := range ordered {
			vb, _ := natsbus.ParseVersion(b)
			if got := va.Less(vb); got != (i < j) {
				t.Errorf("%s < %s: %v, want %v", a, b, got, i < j)
			}
		}
	}
	beta, _ := natsbus.ParseVersion("2.14.0-beta")
	if err := natsbus.FeaturePartitions.Check(natsbus.ServerVersion{URL: "nats://n1:4222", Version: beta}); err == nil {
		t.Error("2.14.0-beta admitted for --partitions, which needs 2.14.0")
	}
}

// TestFeatureCheck: a feature is refused below the latest release its
// APIs need, in one line naming the API the server lacks last, its
// release and the server's.
func TestFeatureCheck(t *testing.T) {
	t.Parallel()
	v := func(s string) natsbus.Version {
		x, err := natsbus.ParseVersion(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, tc := range []struct {
		f      natsbus.Feature
		server string
		want   string // "" works
	}{
		{natsbus.FeaturePartitions, "2.15.2", ""},
		{natsbus.FeaturePartitions, "2.14.0", ""},
		{natsbus.FeaturePartitions, "2.12.3", "--partitions needs nats-server 2.14.0 or later (consumer reset); nats://n1:4222 runs 2.12.3"},
		{natsbus.FeaturePartitions, "2.9.10", "--partitions needs nats-server 2.14.0 or later (consumer reset); nats://n1:4222 runs 2.9.10"},
		{natsbus.FeatureSharedState, "2.11.0", ""},
		{natsbus.FeatureSharedState, "2.10.29", "--shared-state needs nats-server 2.11.0 or later (per-message TTLs); nats://n1:4222 runs 2.10.29"},
		{natsbus.FeatureDedupeMasters, "2.9.10", ""},
		{natsbus.FeatureJetStream, "2.9.0", ""},
		{natsbus.FeatureJetStream, "2.8.4", "--jetstream needs nats-server 2.9.0 or later (the JetStream client API (pull consumers with heartbeats)); nats://n1:4222 runs 2.8.4"},
	} {
		err := tc.f.Check(natsbus.ServerVersion{URL: "nats://n1:4222", Version: v(tc.server), Seen: 1})
		got := ""
		if err != nil {
			got = err.Error()
			var fe *natsbus.FeatureError
			if !errors.As(err, &fe) {
				t.Errorf("%s on %s: %T, want *FeatureError", tc.f.Name, tc.server, err)
			}
		}
		if got != tc.want {
			t.Errorf("%s on %s: %q, want %q", tc.f.Name, tc.server, got, tc.want)
		}
	}
	if m := natsbus.FeaturePartitions.Min(); m != v("2.14.0") {
		t.Errorf("partitions need %v, want 2.14.0", m)
	}
}

// TestServerVersionLowest: a connection given two servers reports the
// lower release, whichever it connected to (it reads the other's INFO).
// The second server is the first binary $REACTORD_TEST_NATS_SERVERS
// names (an older release than the embedded one).
func TestServerVersionLowest(t *testing.T) {
	t.Parallel()
	bins := strings.Fields(os.Getenv("REACTORD_TEST_NATS_SERVERS"))
	if len(bins) == 0 {
		t.Skip("$REACTORD_TEST_NATS_SERVERS unset: no older nats-server to compare with")
	}
	srv, _ := natstest.Start(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freeport.Port(t)))
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bins[0], "-a", "127.0.0.1", "-p", port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	wait.For(t, 10*time.Second, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	for _, urls := range []string{srv.ClientURL() + ",nats://" + addr, "nats://" + addr + "," + srv.ClientURL()} {
		c, err := natsbus.Connect(natsbus.ConnOptions{URL: urls, Name: "test"})
		if err != nil {
			t.Fatal(err)
		}
		sv, err := c.ServerVersion(t.Context())
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if sv.URL != "nats://"+addr || sv.Seen != 2 || !sv.Version.Less(natsbus.Version{Major: 2, Minor: 15}) {
			t.Fatalf("%s: %+v, want the older server %s, 2 seen", urls, sv, addr)
		}
	}
}
