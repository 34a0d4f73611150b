package daemon

import (
	"fmt"
	"strings"

	"github.com/reactord/reactord/config"
)

// TopologyWarnings says where the master configuration cfg, run with the
// options o, would make one minion event react more than once: a master
// of a Salt cluster, whose members all fire every event, without
// --dedupe-masters; a syndic that forwards every event to the master above
// it. Each warning names the key that gave it away (file:line:col) and
// what to set; `reactord check` prints them and the daemon logs them at
// start. See docs/topologies.md.
func TopologyWarnings(cfg *config.Config, o Options) []string {
	if cfg == nil || !cfg.Topology.IsSet() {
		return nil
	}
	t := cfg.Topology
	var out []string
	if t.ClusterID != "" && o.DedupeMasters <= 0 {
		out = append(out, fmt.Sprintf("%s: cluster_id %q: this master is a member of a Salt master cluster, and every member fires every minion event on its own bus; with a bridge on each member (as a member can die), each event reacts once per member unless the daemon runs with --dedupe-masters 2s (dedupe_masters in the reactord: section) on JetStream (docs/topologies.md#a-salt-3007-master-cluster)",
			t.Pos["cluster_id"], t.ClusterID))
	}
	if len(t.SyndicMaster) > 0 && t.SyndicForwardAll && o.DedupeMasters <= 0 {
		out = append(out, fmt.Sprintf("%s: syndic_forward_all_events: this syndic forwards every event to %s, so each event of its minions reaches two buses; with a bridge on both levels each reacts twice unless the daemon runs with --dedupe-masters 2s (or bridge one level only: docs/topologies.md#a-syndic-tree)",
			t.Pos["syndic_forward_all_events"], strings.Join(t.SyndicMaster, ", ")))
	}
	return out
}
