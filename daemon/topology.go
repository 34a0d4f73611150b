package daemon

import (
	"fmt"

	"github.com/reactord/reactord/config"
)

// TopologyWarnings says where the master configuration cfg, run with the
// options o, would make one minion event react more than once: a master
// of a Salt cluster, whose members all fire every event; the top of a
// syndic tree, which fires its syndics' minion events again. Each warning names the key that gave it away (file:line:col) and
// what to set; `reactord check` prints them and the daemon logs them at
// start. See docs/topologies.md.
func TopologyWarnings(cfg *config.Config, o Options) []string {
	if cfg == nil || !cfg.Topology.IsSet() {
		return nil
	}
	t := cfg.Topology
	var out []string
	if t.ClusterID != "" && (o.DedupeMasters <= 0 || !o.JetStream.On(true)) {
		out = append(out, fmt.Sprintf("%s: cluster_id %q: this master is a member of a Salt master cluster, and every member fires every event of the cluster on its own bus (a peer's copy with the same _stamp and __peer_id added); with a bridge on each member (as any member can die), JetStream's Nats-Msg-Id window makes the copies one, and --dedupe-masters 1ms (dedupe_masters in the reactord: section) keeps doing so past it; with --jetstream=false, or without --dedupe-masters when a bridge's spool is flushed late, an event reacts once per member (docs/topologies.md#a-salt-3007-master-cluster)",
			t.Pos["cluster_id"], t.ClusterID))
	}
	if t.OrderMasters {
		out = append(out, fmt.Sprintf("%s: order_masters: this master is the top of a syndic tree, and in syndic_mode sync (the default) it fires again every event of its syndics' minions, under the same tag with a new _stamp (and once more under syndic/<syndic id>/...): a daemon fed by a bridge here reacts to them a second time, beside the syndics' own, and would accept their keys on the wrong master; run reactord on each syndic master, with a NATS of its own, and no bridge here (docs/topologies.md#a-syndic-tree)",
			t.Pos["order_masters"]))
	}
	return out
}
