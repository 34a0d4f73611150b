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
		want   []string // one substring per warning, in order
	}{
		{name: "plain master", master: "reactor: []\n"},
		{name: "master of masters", master: "reactor: []\norder_masters: True\n"},
		{name: "cluster", master: "reactor: []\ncluster_id: prod\n",
			want: []string{`master:2:13: cluster_id "prod": this master is a member of a Salt master cluster`}},
		{name: "cluster with dedupe", master: "reactor: []\ncluster_id: prod\n", dedupe: 2 * time.Second},
		{name: "syndic forwarding everything", master: "reactor: []\nsyndic_master: top\nsyndic_forward_all_events: True\n",
			want: []string{"master:3:28: syndic_forward_all_events: this syndic forwards every event to top"}},
		{name: "syndic forwarding returns", master: "reactor: []\nsyndic_master: top\n"},
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
