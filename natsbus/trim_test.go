package natsbus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reactord/reactord/internal/wait"
)

// TestEnsureStreamTrimmed: the stream made for the shared consumer is
// limits retention marked trimmed for it; partitions get limits
// retention marked trimmed for all its consumers, and refuse the shared
// consumer's trimmed stream as they refuse a work queue; a work queue or
// an interest stream made before is kept, and said so.
func TestEnsureStreamTrimmed(t *testing.T) {
	_, c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	config := func(name string) jetstream.StreamConfig {
		t.Helper()
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config
	}
	if err := c.EnsureStream(ctx, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if cfg := config("REACTORD_EVENTS"); cfg.Retention != jetstream.LimitsPolicy || !Trimmed(cfg, "reactord") || Trimmed(cfg, "other") {
		t.Errorf("the shared consumer's stream: retention %v, metadata %v; want limits, trimmed for reactord only", cfg.Retention, cfg.Metadata)
	}
	if err := c.EnsureStream(ctx, StreamOptions{Partitions: 2}); !errors.Is(err, ErrWorkQueueStream) {
		t.Errorf("partitions on a trimmed stream: %v, want ErrWorkQueueStream", err)
	}
	if err := c.js.DeleteStream(ctx, "REACTORD_EVENTS"); err != nil { // it holds the event subjects
		t.Fatal(err)
	}
	// A stream created right after the account's last one was deleted may
	// fail while nats-server still removes the empty streams directory
	// (consume's recreateGrace): it is tried again until it is made.
	wait.For(t, 10*time.Second, func() error { return c.EnsureStream(ctx, StreamOptions{Stream: "PARTS", Partitions: 2}) })
	if cfg := config("PARTS"); cfg.Retention != jetstream.LimitsPolicy || Trimmed(cfg, "reactord") || !TrimmedForAll(cfg) {
		t.Errorf("the partitions' stream: retention %v, metadata %v; want limits, trimmed for all its consumers", cfg.Retention, cfg.Metadata)
	}
	// An interest stream an earlier reactord made for partitions is kept,
	// and said so.
	if err := c.js.DeleteStream(ctx, "PARTS"); err != nil { // it holds the partitions' subjects
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, func() error {
		_, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "INTEREST", Subjects: []string{"interest.>"}, Retention: jetstream.InterestPolicy})
		return err
	})
	var ilogs bytes.Buffer
	if err := c.EnsureStream(ctx, StreamOptions{Stream: "INTEREST", Partitions: 2, Logger: slog.New(slog.NewTextHandler(&ilogs, nil))}); err != nil {
		t.Fatal(err)
	}
	if cfg := config("INTEREST"); cfg.Retention != jetstream.InterestPolicy || TrimmedForAll(cfg) {
		t.Errorf("an interest stream made before: retention %v, metadata %v; want it kept", cfg.Retention, cfg.Metadata)
	}
	if !strings.Contains(ilogs.String(), "has interest retention") {
		t.Errorf("the interest stream kept was not reported; log:\n%s", ilogs.String())
	}
	if _, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if err := c.EnsureStream(ctx, StreamOptions{Stream: "OLD", Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	if cfg := config("OLD"); cfg.Retention != jetstream.WorkQueuePolicy || Trimmed(cfg, "reactord") {
		t.Errorf("a work queue made before: retention %v, metadata %v; want it kept", cfg.Retention, cfg.Metadata)
	}
	if !strings.Contains(logs.String(), "is a work queue") {
		t.Errorf("the work queue kept was not reported; log:\n%s", logs.String())
	}
	if err := c.EnsureStream(ctx, StreamOptions{Stream: "OLD", Partitions: 2}); !errors.Is(err, ErrWorkQueueStream) {
		t.Errorf("partitions on a work queue: %v, want ErrWorkQueueStream", err)
	}
}

// TestTrimmer: a Trim purges the stream up to the consumer's
// acknowledgement floor, and no further: an event acknowledged after one
// still held stays until the held one is acknowledged. A stream not
// marked for the consumer has no Trimmer.
func TestTrimmer(t *testing.T) {
	_, c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := StreamOptions{}
	o.Defaults()
	if err := c.EnsureStream(ctx, o); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := c.Publish(ctx, Msg{Tag: "salt/test", Body: fmt.Appendf(nil, `{"n": %d}`, i), Meta: Meta{MsgID: fmt.Sprint(i)}}, Stored); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := c.js.CreateOrUpdateConsumer(ctx, o.Stream, o.SharedConsumer())
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 10 {
		t.Fatalf("fetched %d of 10 (%v)", len(msgs), batch.Error())
	}
	ack := func(i ...int) {
		t.Helper()
		for _, i := range i {
			if err := msgs[i].DoubleAck(ctx); err != nil { // the server has it once this returns
				t.Fatal(err)
			}
		}
	}
	tr, err := c.NewTrimmer(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := c.js.Stream(ctx, o.Stream)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, purged, wantPurged, first, msgs uint64) {
		t.Helper()
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if purged != wantPurged || info.State.FirstSeq != first || info.State.Msgs != msgs || tr.Done() != first-1 {
			t.Errorf("%s: purged %d, stream from %d holding %d, done %d; want purged %d, from %d holding %d", step, purged, info.State.FirstSeq, info.State.Msgs, tr.Done(), wantPurged, first, msgs)
		}
	}
	trim := func() uint64 {
		t.Helper()
		n, floor, err := tr.Trim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if floor != tr.Done() {
			t.Errorf("Trim gave floor %d, done %d", floor, tr.Done())
		}
		return n
	}
	check("nothing acknowledged", trim(), 0, 1, 10)
	ack(0, 1, 2, 3, 5) // sequences 1-4 and 6: the floor is 4
	check("four acknowledged, one beyond the floor", trim(), 4, 5, 6)
	check("the floor unmoved", trim(), 0, 5, 6)
	// Another replica's Trimmer: nothing left for it to purge, and it
	// counts nothing; then it purges, and the first one counts nothing.
	other, err := c.NewTrimmer(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if n, floor, err := other.Trim(ctx); n != 0 || floor != 4 || err != nil {
		t.Errorf("a second Trimmer after the first: purged %d to floor %d (%v); want 0 and 4", n, floor, err)
	}
	ack(4) // the floor jumps to 6
	if n, floor, err := other.Trim(ctx); n != 2 || floor != 6 || err != nil {
		t.Errorf("a second Trimmer, the held one acknowledged: purged %d to floor %d (%v); want 2 and 6", n, floor, err)
	}
	check("the held one acknowledged, purged by the other", trim(), 0, 7, 4)
	ack(6, 7, 8, 9)
	check("all acknowledged", trim(), 4, 11, 0)

	// The stream made anew (another replica recreated it): its floor
	// starts over, and the Trimmer follows it down.
	if err := c.js.DeleteStream(ctx, o.Stream); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // as consume's recreateGrace: nats-server is still removing the old one
	wait.For(t, 10*time.Second, func() error { return c.EnsureStream(ctx, o) })
	for i := range 3 {
		if err := c.Publish(ctx, Msg{Tag: "salt/test", Body: fmt.Appendf(nil, `{"n": %d}`, i), Meta: Meta{MsgID: fmt.Sprint("new", i)}}, Stored); err != nil {
			t.Fatal(err)
		}
	}
	if cons, err = c.js.CreateOrUpdateConsumer(ctx, o.Stream, o.SharedConsumer()); err != nil {
		t.Fatal(err)
	}
	if batch, err = cons.Fetch(3, jetstream.FetchMaxWait(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	msgs = msgs[:0]
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 3 {
		t.Fatalf("fetched %d of 3 from the new stream (%v)", len(msgs), batch.Error())
	}
	ack(0, 1)
	check("the new stream, two acknowledged", trim(), 2, 3, 1)

	// Every trims on its own until its context ends.
	ack(2)
	everyCtx, stopEvery := context.WithCancel(ctx)
	everyDone := make(chan struct{})
	go func() {
		defer close(everyDone)
		tr.Every(everyCtx, 10*time.Millisecond, func(err error) bool { t.Errorf("Every: %v", err); return false })
	}()
	wait.For(t, 5*time.Second, func() error {
		if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 0 {
			return fmt.Errorf("Every has not trimmed the last acknowledged event: %v, %+v", err, info.State)
		}
		return nil
	})
	stopEvery()
	<-everyDone
	// The stop may cancel Every's purge after the server made it (done
	// then lags): a Trim after it finds nothing left to purge.
	if purged, floor, err := tr.Trim(ctx); err != nil || purged != 0 || floor != 3 || tr.Done() != 3 {
		t.Errorf("a Trim after Every: purged %d to floor %d (%v), done %d; want 0, 3, done 3", purged, floor, err, tr.Done())
	}

	// Replaced by a stream that is not trimmed: never purged.
	if err := c.js.DeleteStream(ctx, o.Stream); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	wait.For(t, 10*time.Second, func() error {
		_, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: o.Stream, Subjects: []string{c.prefix + ">"}})
		return err
	})
	if _, err := c.js.CreateOrUpdateConsumer(ctx, o.Stream, o.SharedConsumer()); err != nil {
		t.Fatal(err)
	}
	var everyErr error
	tr.Every(ctx, 10*time.Millisecond, func(err error) bool { everyErr = err; return false }) // returns on the failure
	if !errors.Is(everyErr, ErrNotTrimmed) {
		t.Errorf("Every on a stream replaced by an unmarked one: %v, want ErrNotTrimmed", everyErr)
	}
	if _, _, err := tr.Trim(ctx); !errors.Is(err, ErrNotTrimmed) {
		t.Errorf("Trim on a stream replaced by an unmarked one: %v, want ErrNotTrimmed", err)
	}

	// An operator's stream, a work queue, and a stream trimmed for
	// another consumer are never purged.
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "MINE", Subjects: []string{"mine.>"}},
		{Name: "QUEUE", Subjects: []string{"queue.>"}, Retention: jetstream.WorkQueuePolicy},
		{Name: "OTHERS", Subjects: []string{"others.>"}, Metadata: map[string]string{TrimmedKey: "someone-else"}},
	} {
		if _, err := c.js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := c.NewTrimmer(ctx, StreamOptions{Stream: cfg.Name}); !errors.Is(err, ErrNotTrimmed) {
			t.Errorf("stream %s: NewTrimmer gave %v, want ErrNotTrimmed", cfg.Name, err)
		}
	}
}
