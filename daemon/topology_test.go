package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reactord/reactord/config"
)

// TestTopologyWarnings: a master configuration that would react once per
// master is warned about, naming the key's place and what to set; the
// same with --dedupe-masters, or a plain master, is not.
func TestTopologyWarnings(t *testing.T) {
	tests := []struct {
		name   string
		master string
		dedupe time.Duration
		core   bool     // --jetstream=false
		want   []string // one substring per warning, in order
	}{
		{name: "plain master", master: "reactor: []\n"},
		{name: "master of masters", master: "reactor: []\norder_masters: True\n",
			want: []string{"master:2:16: order_masters: this master is the top of a syndic tree"}},
		// --dedupe-masters cannot help: the syndics' daemons have NATS
		// of their own, so the top's copies meet no other copy.
		{name: "master of masters with dedupe", master: "reactor: []\norder_masters: True\n", dedupe: 2 * time.Second,
			want: []string{"master:2:16: order_masters"}},
		{name: "cluster", master: "reactor: []\ncluster_id: prod\n",
			want: []string{`master:2:13: cluster_id "prod": this master is a member of a Salt master cluster`}},
		{name: "cluster with dedupe", master: "reactor: []\ncluster_id: prod\n", dedupe: time.Millisecond},
		{name: "cluster with dedupe in core NATS", master: "reactor: []\ncluster_id: prod\n", dedupe: time.Millisecond, core: true,
			want: []string{`master:2:13: cluster_id "prod"`}},
		// A syndic master is where reactord belongs in a tree;
		// syndic_forward_all_events does nothing in Salt 3006 and 3007.
		{name: "syndic", master: "reactor: []\nsyndic_master: top\nsyndic_forward_all_events: True\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "master")
			if err := os.WriteFile(path, []byte(tc.master), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			o := Defaults()
			o.DedupeMasters = tc.dedupe
			if tc.core {
				o.JetStream = AutoBool{Given: true}
			}
			got := TopologyWarnings(cfg, o)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings = %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "docs/topologies.md") {
					t.Errorf("warning %d = %q, want it to hold %q and the docs' page", i, got[i], w)
				}
			}
		})
	}
}
