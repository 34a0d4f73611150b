package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTopology: the keys that place a master in a syndic tree or a Salt
// cluster are read the way Salt merges them (master.d over the main
// file), with where each was set.
func TestTopology(t *testing.T) {
	tests := []struct {
		name   string
		master string
		conf   string // master.d/topology.conf ("": none)
		want   Topology
		pos    map[string]string // key → file:line:col's file base and line
	}{
		{name: "none", master: "reactor: []\n"},
		{
			name:   "syndic",
			master: "reactor: []\nsyndic_master: top.example.com\nsyndic_forward_all_events: True\n",
			want:   Topology{SyndicMaster: []string{"top.example.com"}, SyndicForwardAll: true},
			pos:    map[string]string{"syndic_master": "master:2", "syndic_forward_all_events": "master:3"},
		},
		{
			name:   "syndic under two masters",
			master: "reactor: []\nsyndic_master:\n  - top1\n  - top2\n",
			want:   Topology{SyndicMaster: []string{"top1", "top2"}},
			pos:    map[string]string{"syndic_master": "master:3"},
		},
		{
			name:   "master of masters",
			master: "reactor: []\norder_masters: true\n",
			want:   Topology{OrderMasters: true},
			pos:    map[string]string{"order_masters": "master:2"},
		},
		{
			name:   "cluster in master.d wins",
			master: "reactor: []\ncluster_id: old\n",
			conf:   "cluster_id: salt-prod\ncluster_peers: [10.0.0.2, 10.0.0.3]\n",
			want:   Topology{ClusterID: "salt-prod", ClusterPeers: []string{"10.0.0.2", "10.0.0.3"}},
			pos:    map[string]string{"cluster_id": "topology.conf:1", "cluster_peers": "topology.conf:2"},
		},
		{
			name:   "off",
			master: "reactor: []\norder_masters: False\nsyndic_forward_all_events: false\n",
			want:   Topology{},
			pos:    map[string]string{"order_masters": "master:2", "syndic_forward_all_events": "master:3"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "master"), []byte(tc.master), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.conf != "" {
				if err := os.MkdirAll(filepath.Join(dir, "master.d"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "master.d", "topology.conf"), []byte(tc.conf), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := Load(filepath.Join(dir, "master"))
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Topology
			if got.OrderMasters != tc.want.OrderMasters || got.SyndicForwardAll != tc.want.SyndicForwardAll ||
				got.ClusterID != tc.want.ClusterID || !slices.Equal(got.SyndicMaster, tc.want.SyndicMaster) ||
				!slices.Equal(got.ClusterPeers, tc.want.ClusterPeers) {
				t.Errorf("topology = %+v, want %+v", got, tc.want)
			}
			if len(got.Pos) != len(tc.pos) {
				t.Errorf("positions = %v, want keys of %v", got.Pos, tc.pos)
			}
			for key, want := range tc.pos {
				p, ok := got.Pos[key]
				if !ok {
					t.Errorf("no position for %s", key)
					continue
				}
				if at := filepath.Base(p.File) + ":" + itoa(p.Line); at != want {
					t.Errorf("%s at %s, want %s", key, at, want)
				}
			}
			if got.IsSet() != (len(tc.pos) > 0) {
				t.Errorf("IsSet() = %v", got.IsSet())
			}
		})
	}
}
