package natsbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/freeport"
	"github.com/reactord/reactord/internal/natstest"
	"github.com/reactord/reactord/internal/wait"
	"github.com/reactord/reactord/natsbus"
)

// probeWait bounds each probe's calls: a server without an API never
// answers its request.
const probeWait = 3 * time.Second

// apiProbes runs, for each Requirement.API of natsbus.Features, the real
// JetStream calls reactord makes for it, and returns nil when they work
// on the server c is connected to.
var apiProbes = map[string]func(ctx context.Context, c *natsbus.Conn) error{
	"the JetStream client API (pull consumers with heartbeats)": func(ctx context.Context, c *natsbus.Conn) error {
		js := c.JetStream()
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE_PULL", Subjects: []string{"probe.pull"}})
		if err != nil {
			return err
		}
		cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "pull", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			return err
		}
		if _, err := js.Publish(ctx, "probe.pull", []byte("x")); err != nil {
			return err
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(probeWait), jetstream.FetchHeartbeat(time.Second))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			_ = m.Ack()
		}
		if n != 1 {
			return fmt.Errorf("fetched %d messages, want 1 (%v)", n, batch.Error())
		}
		return nil
	},
	"stream subject transform partition()": func(ctx context.Context, c *natsbus.Conn) error {
		so := natsbus.StreamOptions{Stream: "PROBE_PART", Partitions: 4}
		if err := c.EnsureStream(ctx, so); err != nil {
			return err
		}
		if err := c.SetPartitionTransform(ctx, so); err != nil {
			return err
		}
		s, err := c.JetStream().Stream(ctx, "PROBE_PART")
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		// A server without transforms ignores the field: read it back.
		want := natsbus.PartitionTransform(c.Prefix(), 4)
		if info.Config.SubjectTransform == nil || *info.Config.SubjectTransform != want {
			return fmt.Errorf("the transform read back is %+v, want %+v", info.Config.SubjectTransform, want)
		}
		return nil
	},
	"pinned-client priority groups and consumer unpin": func(ctx context.Context, c *natsbus.Conn) error {
		s, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE_PIN", Subjects: []string{"probe.pin"}})
		if err != nil {
			return err
		}
		cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "pinned", AckPolicy: jetstream.AckExplicitPolicy,
			PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"g"}, PinnedTTL: time.Minute})
		if err != nil {
			return err
		}
		// A server without priority groups ignores the fields.
		if p := cons.CachedInfo().Config.PriorityPolicy; p != jetstream.PriorityPolicyPinned {
			return fmt.Errorf("the consumer's priority policy read back is %v, want pinned_client", p)
		}
		// Nothing pinned: the server that has the API answers at once
		// (an error saying so or none); one without it never answers.
		err = s.UnpinConsumer(ctx, "pinned", "g")
		var apiErr *jetstream.APIError
		if err != nil && !errors.As(err, &apiErr) {
			return fmt.Errorf("unpin: %w", err)
		}
		return nil
	},
	"per-message TTLs for the partitions bucket": kvMarkerTTL("PROBE_PARTS"),
	"per-message TTLs":                           kvMarkerTTL("PROBE_GUARD"),
	"consumer reset": func(ctx context.Context, c *natsbus.Conn) error {
		s, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE_RESET", Subjects: []string{"probe.reset"}})
		if err != nil {
			return err
		}
		if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "r", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			return err
		}
		_, err = s.ResetConsumer(ctx, "r")
		return err
	},
	"atomic batch publish": func(ctx context.Context, c *natsbus.Conn) error {
		// A server without atomic batches ignores the stream's field and
		// the batch headers (storing each message as it comes): read the
		// field back, and want the commit's acknowledgement to count the
		// batch.
		s, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE_ATOMIC", Subjects: []string{"probe.atomic"}, AllowAtomicPublish: true})
		if err != nil {
			return err
		}
		if !s.CachedInfo().Config.AllowAtomicPublish {
			return errors.New("the stream's allow_atomic reads back false")
		}
		nc := c.NATS()
		m := nats.NewMsg("probe.atomic")
		m.Header.Set("Nats-Batch-Id", "probe")
		m.Header.Set("Nats-Batch-Sequence", "1")
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
		m = nats.NewMsg("probe.atomic")
		m.Header.Set("Nats-Batch-Id", "probe")
		m.Header.Set("Nats-Batch-Sequence", "2")
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return err
		}
		var ack struct {
			Count int                 `json:"count"`
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return err
		}
		if ack.Error != nil {
			return ack.Error
		}
		if ack.Count != 2 {
			return fmt.Errorf("the commit's acknowledgement counts %d messages, want 2: %s", ack.Count, resp.Data)
		}
		return nil
	},
	"stream metadata": func(ctx context.Context, c *natsbus.Conn) error {
		// A server without metadata ignores the field: read it back.
		s, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE_META", Subjects: []string{"probe.meta"}, Metadata: map[string]string{natsbus.TrimmedKey: "reactord"}})
		if err != nil {
			return err
		}
		if got := s.CachedInfo().Config.Metadata[natsbus.TrimmedKey]; got != "reactord" {
			return fmt.Errorf("the stream's metadata reads back %v, want %s: reactord", s.CachedInfo().Config.Metadata, natsbus.TrimmedKey)
		}
		return nil
	},
	"key-value buckets with a TTL": func(ctx context.Context, c *natsbus.Conn) error {
		kv, err := c.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "PROBE_COPIES", TTL: time.Hour, History: 1})
		if err != nil {
			return err
		}
		_, err = kv.Create(ctx, "k", []byte("v"))
		return err
	},
}

// kvMarkerTTL probes a key-value bucket with LimitMarkerTTL (per-message
// TTLs), as kv.Open creates the shared state's, and a key given a TTL.
func kvMarkerTTL(bucket string) func(ctx context.Context, c *natsbus.Conn) error {
	return func(ctx context.Context, c *natsbus.Conn) error {
		kv, err := c.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, LimitMarkerTTL: time.Second})
		if err != nil {
			return err
		}
		_, err = kv.Create(ctx, "k", []byte("v"), jetstream.KeyTTL(time.Minute))
		return err
	}
}

// TestFeatureTableMatchesServers: on each nats-server release at hand
// ($REACTORD_TEST_NATS_SERVERS, and the embedded one), the real calls
// each API of natsbus.Features needs work exactly when the table says
// the release has it: a call refused on a release the table admits fails
// the test, and so does one that works on a release the table refuses.
func TestFeatureTableMatchesServers(t *testing.T) {
	t.Parallel()
	for _, f := range natsbus.Features() {
		for _, r := range f.Needs {
			if apiProbes[r.API] == nil {
				t.Fatalf("%s: no probe for %q", f.Name, r.API)
			}
		}
	}
	bins := strings.Fields(os.Getenv("REACTORD_TEST_NATS_SERVERS"))
	if len(bins) == 0 {
		t.Log("$REACTORD_TEST_NATS_SERVERS unset: the embedded server only")
	}
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		_, c := natstest.Start(t)
		probeServer(t, c)
	})
	for _, bin := range bins {
		t.Run(bin, func(t *testing.T) {
			t.Parallel()
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freeport.Port(t)))
			_, port, _ := net.SplitHostPort(addr)
			cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", t.TempDir())
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			var c *natsbus.Conn
			wait.For(t, 15*time.Second, func() (err error) {
				c, err = natsbus.Connect(natsbus.ConnOptions{URL: "nats://" + addr, Name: "probe"})
				return err
			})
			t.Cleanup(c.Close)
			wait.For(t, 15*time.Second, func() error {
				if has, why := c.JetStreamEnabled(t.Context()); !has {
					return errors.New(why)
				}
				return nil
			})
			probeServer(t, c)
		})
	}
}

// probeServer runs every probe on c's server and compares with the table.
func probeServer(t *testing.T, c *natsbus.Conn) {
	t.Helper()
	sv, err := c.ServerVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	works := map[string]error{}
	for _, f := range natsbus.Features() {
		for _, r := range f.Needs {
			if _, done := works[r.API]; done {
				continue
			}
			ctx, cancel := context.WithTimeout(t.Context(), probeWait)
			err := apiProbes[r.API](ctx, c)
			cancel()
			works[r.API] = err
			admitted := !sv.Version.Less(r.Min)
			switch {
			case admitted && err != nil:
				t.Errorf("nats-server %s: %s: the table says %s has it, but: %v", sv.Version, r.API, r.Min, err)
			case !admitted && err == nil:
				t.Errorf("nats-server %s: %s works, but the table says it needs %s", sv.Version, r.API, r.Min)
			case err != nil:
				t.Logf("nats-server %s: %s refused as the table says (needs %s): %v", sv.Version, r.API, r.Min, err)
			default:
				t.Logf("nats-server %s: %s works (needs %s)", sv.Version, r.API, r.Min)
			}
		}
	}
	// The event stream the shared consumer creates: trimmed where the
	// table admits it, a work queue before.
	ctx, cancel := context.WithTimeout(t.Context(), probeWait)
	defer cancel()
	// The partitions' probe took the event subjects.
	if err := c.JetStream().DeleteStream(ctx, "PROBE_PART"); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal(err)
	}
	so := natsbus.StreamOptions{Stream: "PROBE_EVENTS"}
	if err := c.EnsureStream(ctx, so); err != nil {
		t.Fatal(err)
	}
	s, err := c.JetStream().Stream(ctx, "PROBE_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	want := jetstream.WorkQueuePolicy
	if natsbus.FeatureTrimmedStream.Check(sv) == nil {
		want = jetstream.LimitsPolicy
	}
	if cfg.Retention != want || natsbus.Trimmed(cfg, "reactord") != (want == jetstream.LimitsPolicy) {
		t.Errorf("nats-server %s: the event stream has retention %v and metadata %v, want %v and trimmed=%t", sv.Version, cfg.Retention, cfg.Metadata, want, want == jetstream.LimitsPolicy)
	}
}
