package config

import (
	"fmt"
	"strings"

	"github.com/reactord/reactord/internal/yaml11"
)

// Topology is what a Salt master's own configuration says about the
// masters around it: the keys that decide whether one minion event reaches
// one master's bus or several. reactord does not act on them; `check` and
// the daemon's start read them to warn about a deployment that would
// react once per master (docs/topologies.md).
type Topology struct {
	// OrderMasters is order_masters: this master is a master of masters,
	// the top of a syndic tree.
	OrderMasters bool
	// SyndicMaster is syndic_master: this master is a syndic, under the
	// master (or masters) named.
	SyndicMaster []string
	// SyndicForwardAll is syndic_forward_all_events. Salt 3006 and 3007
	// read it nowhere: a syndic in syndic_mode sync forwards every event
	// whatever it says, and reactord warns about nothing on it.
	SyndicForwardAll bool
	// ClusterID is cluster_id (Salt 3007): this master is a member of a
	// master cluster, whose members all fire every event.
	ClusterID string
	// ClusterPeers is cluster_peers: the other members' addresses.
	ClusterPeers []string
	// Pos locates each key that was set, by its name.
	Pos map[string]Pos
}

// IsSet reports whether any topology key was set.
func (t Topology) IsSet() bool { return len(t.Pos) > 0 }

// topology reads the topology keys of d over what earlier files set.
func (l *loader) topology(cfg *Config, d *doc) {
	set := func(key string, n *yaml11.Node) {
		if cfg.Topology.Pos == nil {
			cfg.Topology.Pos = map[string]Pos{}
		}
		cfg.Topology.Pos[key] = nodePos(d.path, n)
	}
	truthy := func(n *yaml11.Node) bool {
		v, ok := yaml11.Resolve(n.Text).(bool)
		if !ok {
			s, _ := scalarString(n)
			return strings.EqualFold(s, "true")
		}
		return v
	}
	list := func(n *yaml11.Node) []string {
		if s, ok := scalarString(n); ok {
			if s == "" {
				return nil
			}
			return []string{s}
		}
		if n.Kind != yaml11.SequenceNode {
			return []string{fmt.Sprint(n.Text)}
		}
		var out []string
		for _, c := range n.Content {
			if c.Kind == yaml11.ScalarNode {
				out = append(out, c.Text)
			}
		}
		return out
	}
	if n := lookup(d.root, "order_masters"); n != nil && n.Kind == yaml11.ScalarNode {
		cfg.Topology.OrderMasters = truthy(n)
		set("order_masters", n)
	}
	if n := lookup(d.root, "syndic_master"); n != nil {
		cfg.Topology.SyndicMaster = list(n)
		set("syndic_master", n)
	}
	if n := lookup(d.root, "syndic_forward_all_events"); n != nil && n.Kind == yaml11.ScalarNode {
		cfg.Topology.SyndicForwardAll = truthy(n)
		set("syndic_forward_all_events", n)
	}
	if n := lookup(d.root, "cluster_id"); n != nil {
		cfg.Topology.ClusterID, _ = scalarString(n)
		set("cluster_id", n)
	}
	if n := lookup(d.root, "cluster_peers"); n != nil {
		cfg.Topology.ClusterPeers = list(n)
		set("cluster_peers", n)
	}
}
