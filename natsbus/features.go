package natsbus

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/redact"
)

// Version is a nats-server release: major.minor.patch, and a
// pre-release ("beta", "RC.1") that ranks below the release itself.
type Version struct {
	Major, Minor, Patch int
	// Pre is the pre-release, without its "-"; "" for a release.
	Pre string
}

// ParseVersion reads a server's version as its INFO gives it ("2.12.3",
// "v2.11.0-RC.2"); build metadata ("2.12.3+abc") is left out.
func ParseVersion(s string) (Version, error) {
	bad := fmt.Errorf("nats-server version %q: want major.minor.patch", s)
	v, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(s), "v"), "+")
	core, pre, hasPre := strings.Cut(v, "-")
	if hasPre && pre == "" {
		return Version{}, bad
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return Version{}, bad
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, bad
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2], pre}, nil
}

// String is the version as nats-server gives it: "2.12.3",
// "2.14.0-RC.1".
func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

// Less reports whether v is an earlier release than w; a pre-release
// comes before its release, and pre-releases compare as semantic
// versioning says (dot-separated, numbers as numbers, below words).
func (v Version) Less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	if v.Patch != w.Patch {
		return v.Patch < w.Patch
	}
	switch {
	case v.Pre == w.Pre:
		return false
	case v.Pre == "":
		return false
	case w.Pre == "":
		return true
	}
	return preLess(v.Pre, w.Pre)
}

// preLess orders two pre-releases.
func preLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] == bs[i] {
			continue
		}
		an, aErr := strconv.Atoi(as[i])
		bn, bErr := strconv.Atoi(bs[i])
		switch {
		case aErr == nil && bErr == nil:
			return an < bn
		case aErr == nil:
			return true
		case bErr == nil:
			return false
		}
		return as[i] < bs[i]
	}
	return len(as) < len(bs)
}

// Requirement is one JetStream API a feature calls, and the first
// nats-server release that has it.
type Requirement struct {
	// API names it as the refusal says it: "consumer reset".
	API string
	Min Version
}

// Feature is one of reactord's features built on JetStream, with the
// server APIs it needs. Features lists them all: the daemon refuses a
// feature the server cannot have (or falls back, when Fallback says how)
// and reactord check reports each.
type Feature struct {
	// Name is how the user turns it on: a flag.
	Name string
	// What says what it is, for check's report.
	What string
	// Needs are the APIs it calls; the feature needs the latest of them.
	Needs []Requirement
	// Fallback, when set, is what the daemon does instead on a server
	// too old (the feature is not refused).
	Fallback string
}

// The features, and the nats-server releases their APIs need (measured
// against 2.9.10, 2.10.29, 2.11.12, 2.12.3, 2.14.0 and the embedded 2.15.2 by
// TestFeatureTableMatchesServers; see
// docs/delivery-and-replicas.md#nats-server-versions).
var (
	// FeatureJetStream is the JetStream delivery: the event stream and
	// the shared durable consumer, the default whenever the server has
	// JetStream.
	FeatureJetStream = Feature{Name: "--jetstream", What: "JetStream delivery: stream REACTORD_EVENTS and the shared durable consumer",
		Needs:    []Requirement{{"the JetStream client API (pull consumers with heartbeats)", Version{Major: 2, Minor: 9, Patch: 0}}},
		Fallback: "core NATS queue group (events can be dropped), when --jetstream is not given"}
	// FeaturePartitions is --partitions: per-minion order across
	// replicas.
	FeaturePartitions = Feature{Name: "--partitions", What: "partitions by minion, one replica each",
		Needs: []Requirement{
			{"stream subject transform partition()", Version{Major: 2, Minor: 10, Patch: 0}},
			{"pinned-client priority groups and consumer unpin", Version{Major: 2, Minor: 11, Patch: 0}},
			{"per-message TTLs for the partitions bucket", Version{Major: 2, Minor: 11, Patch: 0}},
			{"consumer reset", Version{Major: 2, Minor: 14, Patch: 0}},
		}}
	// FeatureSharedState is --shared-state: the loop guard, throttle and
	// debounce shared by the replicas.
	FeatureSharedState = Feature{Name: "--shared-state", What: "the loop guard, throttle and debounce shared by the replicas (bucket REACTORD_GUARD)",
		Needs:    []Requirement{{"per-message TTLs", Version{Major: 2, Minor: 11, Patch: 0}}},
		Fallback: "the state stays in each process's memory"}
	// FeatureDedupeMasters is --dedupe-masters: one reaction for the
	// copies several masters fire of one event.
	FeatureDedupeMasters = Feature{Name: "--dedupe-masters", What: "copies of one event from several masters react once (bucket REACTORD_COPIES)",
		Needs: []Requirement{{"key-value buckets with a TTL", Version{Major: 2, Minor: 9, Patch: 0}}}}
	// FeatureBatchPublish is the publishers' atomic batches (the bridge,
	// fire; see Publisher): no flag, on whenever the server has it.
	FeatureBatchPublish = Feature{Name: "batched publishing", What: "publishers send events in atomic batches, each written and flushed to disk once (stream allow_atomic)",
		Needs:    []Requirement{{"atomic batch publish", AtomicBatchMin}},
		Fallback: "each event published and flushed on its own (several in flight)"}
	// FeatureTrimmedStream is the event stream EnsureStream creates for
	// the shared consumer: limits retention, trimmed to the consumer's
	// acknowledgement floor (Trimmer), and marked so in its metadata.
	FeatureTrimmedStream = Feature{Name: "trimmed event stream", What: "the replicas purge what the shared consumer acknowledged from stream REACTORD_EVENTS, one flush for many events (stream metadata marks it)",
		Needs:    []Requirement{{"stream metadata", Version{Major: 2, Minor: 10, Patch: 0}}},
		Fallback: "a work queue, which removes and flushes each acknowledged event on its own"}
)

// Features lists the features in the order check reports them.
func Features() []Feature {
	return []Feature{FeatureJetStream, FeaturePartitions, FeatureSharedState, FeatureDedupeMasters, FeatureBatchPublish, FeatureTrimmedStream}
}

// Min is the first release with every API the feature needs.
func (f Feature) Min() Version {
	var m Version
	for _, r := range f.Needs {
		if m.Less(r.Min) {
			m = r.Min
		}
	}
	return m
}

// Check returns nil when server can have the feature, else a
// *FeatureError naming the latest API it lacks.
func (f Feature) Check(server ServerVersion) error {
	var missing *Requirement
	for i, r := range f.Needs {
		if server.Version.Less(r.Min) && (missing == nil || missing.Min.Less(r.Min)) {
			missing = &f.Needs[i]
		}
	}
	if missing == nil {
		return nil
	}
	return &FeatureError{Feature: f, Missing: *missing, Server: server}
}

// FeatureError is a feature the server is too old for.
type FeatureError struct {
	Feature Feature
	Missing Requirement
	Server  ServerVersion
}

// Error is the one line the daemon refuses the feature with:
// "--partitions needs nats-server 2.14.0 or later (consumer reset);
// nats://127.0.0.1:4222 runs 2.12.3".
func (e *FeatureError) Error() string {
	return fmt.Sprintf("%s needs nats-server %s or later (%s); %s runs %s", e.Feature.Name, e.Missing.Min, e.Missing.API, e.Server.URL, e.Server.Version)
}

// ServerVersion is the release of a NATS server the connection sees: the
// lowest of those that answered (ServerVersion).
type ServerVersion struct {
	// URL is the server's, credentials left out.
	URL     string
	Version Version
	// Seen is how many servers told their version (1: the connected
	// one only).
	Seen int
}

// infoWait bounds the reading of another cluster node's INFO.
const infoWait = time.Second

// ServerVersion returns the release of the connected server or, when the
// connection knows other servers of its cluster (given in the URL or
// announced by the server) and they answer a plain TCP connection with
// their INFO within a second, the lowest of them all: a cluster offers
// what its oldest node has. Servers that do not answer so (TLS first, a
// firewall) are left out.
func (c *Conn) ServerVersion(ctx context.Context) (ServerVersion, error) {
	connected := c.nc.ConnectedUrlRedacted()
	v, err := ParseVersion(c.nc.ConnectedServerVersion())
	if err != nil {
		return ServerVersion{}, fmt.Errorf("%s: %w", connected, err)
	}
	low := ServerVersion{URL: connected, Version: v, Seen: 1}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range c.nc.Servers() {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || redact.URLs(s) == connected || u.Host == c.nc.ConnectedAddr() {
			continue
		}
		wg.Go(func() {
			ver, err := readInfoVersion(ctx, u.Host)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			low.Seen++
			if ver.Less(low.Version) {
				low.URL, low.Version = redact.URLs(s), ver
			}
		})
	}
	wg.Wait()
	return low, nil
}

// readInfoVersion dials addr and reads the version from the INFO line a
// NATS server sends first.
func readInfoVersion(ctx context.Context, addr string) (Version, error) {
	ctx, cancel := context.WithTimeout(ctx, infoWait)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Version{}, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(dl)
	}
	line, err := bufio.NewReaderSize(conn, 4096).ReadString('\n')
	if err != nil {
		return Version{}, err
	}
	body, ok := strings.CutPrefix(line, "INFO ")
	if !ok {
		return Version{}, errors.New("no INFO")
	}
	var info struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		return Version{}, err
	}
	return ParseVersion(info.Version)
}

// JetStreamEnabled asks the server whether this connection's account has
// JetStream (its account information), else, when the question gets no
// answer, what the server's INFO says. why says how it knows.
func (c *Conn) JetStreamEnabled(ctx context.Context) (has bool, why string) {
	has, _, why = c.jetStreamAnswer(ctx)
	return has, why
}

// ErrNoJetStream is what JetStreamAbsent returns, wrapped with why, when
// the server says for certain that this connection has no JetStream.
var ErrNoJetStream = errors.New("the NATS server has no JetStream for this connection")

// JetStreamAbsent returns an error (errors.Is ErrNoJetStream, saying why)
// when the server answers for certain that this connection's account has
// no JetStream: the account information says so, and so does the server's
// INFO (a cluster node that has JetStream but has not elected yet says
// JetStream in its INFO). nil when it has JetStream or cannot tell yet.
func (c *Conn) JetStreamAbsent(ctx context.Context) error {
	has, definite, why := c.jetStreamAnswer(ctx)
	if has || !definite {
		return nil
	}
	return fmt.Errorf("%w (%s)", ErrNoJetStream, why)
}

// jetStreamAnswer is JetStreamEnabled's answer; definite: the server
// itself said no (not a question left unanswered).
func (c *Conn) jetStreamAnswer(ctx context.Context) (has, definite bool, why string) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.js.AccountInfo(actx)
	info, _ := c.nc.ConnectedServerJetStream()
	switch {
	case err == nil:
		return true, true, "the account has JetStream"
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return false, true, "JetStream is not enabled for this account"
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		// Also what no answer at all becomes (no server subscribed to
		// the JetStream API): definite when the INFO agrees.
		return false, !info, "JetStream is not enabled on the server"
	}
	if info {
		return true, false, "the server's INFO says JetStream (its account information did not answer: " + err.Error() + ")"
	}
	return false, false, "the server's INFO says no JetStream, and its account information did not answer: " + err.Error()
}
