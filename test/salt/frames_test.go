package salt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/masterdriver"
	"github.com/reactord/reactord/event"
)

// TestRecordMasterFrames records what a real master answers on its request
// channel to the loads the master driver sends (a publish to a glob and to
// a list, a runner, a publish with a key the master does not know), for
// actions/masterdriver's stand-in: set REACTORD_RECORD_FRAMES to the
// testdata directory (actions/masterdriver/testdata); each case is written
// as VERSION/NAME.json holding the load sent (the key replaced by
// "MASTER-KEY") and the master's answer as base64 msgpack.
func TestRecordMasterFrames(t *testing.T) {
	out := os.Getenv("REACTORD_RECORD_FRAMES")
	if out == "" {
		t.Skip("set REACTORD_RECORD_FRAMES=DIR to record a real master's request channel")
	}
	e := startSalt(t)
	e.startMinions()
	waitFor(t, 120*time.Second, "minion keys", func() error {
		o, err := e.salt("salt-key", "-l", "pre", "--out", "json")
		if err != nil || strings.Count(o, "web") < 2 {
			return fmt.Errorf("pending: %s %v", o, err)
		}
		return nil
	})
	if o, err := e.salt("salt-key", "-A", "-y"); err != nil {
		t.Fatalf("salt-key -A: %v %s", err, o)
	}
	version, err := e.salt("salt-run", "--version")
	if err != nil {
		t.Fatal(err)
	}
	version = strings.Fields(version)[1]
	mc, err := masterdriver.ReadMasterConfig(e.etc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := masterdriver.New(masterdriver.Config{Master: mc})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	key, err := os.ReadFile(mc.KeyFile("root"))
	if err != nil {
		t.Fatal(err)
	}
	sock := zmq4.NewReq(context.Background(), zmq4.WithTimeout(15*time.Second))
	defer sock.Close()
	if err := sock.Dial(mc.URI()); err != nil {
		t.Fatal(err)
	}
	local := func(tgt any, tgtType string) map[string]any {
		call, err := actions.CallFor(chunkOf(map[string]any{"state": "local", "fun": "test.ping", "tgt": tgt, "tgt_type": tgtType}))
		if err != nil {
			t.Fatal(err)
		}
		load, err := d.PublishLoad(call, string(key))
		if err != nil {
			t.Fatal(err)
		}
		return load
	}
	bad := local("*", "glob")
	bad["key"] = "not the master's key"
	cases := []struct {
		name string
		load map[string]any
	}{
		{"publish-glob", local("*", "glob")},
		{"publish-list", local([]any{"web1", "web2"}, "list")},
		{"runner", map[string]any{"cmd": "runner", "fun": "test.arg", "kwarg": map[string]any{"arg": []any{"a"}, "kwarg": map[string]any{"k": "v"}}, "key": string(key), "user": "root"}},
		{"publish-bad-key", bad},
	}
	dir := filepath.Join(out, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		body, err := msgpack.Marshal(map[string]any{"enc": "clear", "load": c.load, "version": 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := sock.Send(zmq4.NewMsg(body)); err != nil {
			t.Fatal(err)
		}
		msg, err := sock.Recv()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.load["key"] == string(key) {
			c.load["key"] = "MASTER-KEY"
		}
		rec, _ := json.MarshalIndent(map[string]any{"load": c.load, "answer": msg.Frames[len(msg.Frames)-1]}, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, c.name+".json"), append(rec, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		var ans any
		_ = msgpack.Unmarshal(msg.Frames[len(msg.Frames)-1], &ans)
		t.Logf("%s %s: %v", version, c.name, ans)
	}
}

// chunkOf makes a chunk of a plain map.
func chunkOf(m map[string]any) *event.Chunk {
	c := event.NewMap(len(m))
	for k, v := range m {
		c.Set(k, v)
	}
	return c
}
