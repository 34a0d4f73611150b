package reactor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/store"
)

// Metrics are the reactor's Prometheus metrics, registered on an injected
// registry (tests use a fresh one).
type Metrics struct {
	Events  prometheus.Counter
	Matched prometheus.Counter
	// RuleMatches counts, by rule glob, the events each rule matched.
	RuleMatches *prometheus.CounterVec
	Malformed   prometheus.Counter
	// Dropped counts events dropped without any reaction, by reason
	// (DropLaneFull, DropSlowConsumer).
	Dropped *prometheus.CounterVec
	// ArchiveDropped counts events reacted to but not archived: the audit
	// store's memory and disk spool were full (core NATS mode; JetStream
	// leaves such events for redelivery instead).
	ArchiveDropped prometheus.Counter
	RenderErrors   prometheus.Counter
	Suppressed     *prometheus.CounterVec
	Actions        *prometheus.CounterVec
	ActionDuration *prometheus.HistogramVec
	DeadLetters    prometheus.Counter
	// Parked counts events parked because the daemon kept dying on them
	// (Options.Journal).
	Parked     prometheus.Counter
	ReloadOK   prometheus.Gauge
	QueueDepth prometheus.Gauge
	// ConcurrencyQueued is the number of events waiting for a slot of a
	// rule's concurrency limit.
	ConcurrencyQueued prometheus.Gauge
	// HandedOver counts the driver calls a lane handed over: the driver
	// had not answered when it said the call's request had left
	// (actions.Sent), or within Options.HandOverAfter, and the lane went
	// on (Options.InFlight).
	HandedOver prometheus.Counter
	// Retries counts the retry option's work, by outcome: retried (a job
	// run again), succeeded (a retry with no failure left), gave_up,
	// resumed (a pending retry taken up after its event came back).
	Retries *prometheus.CounterVec
	Latency prometheus.Histogram
	// SentLatency is the time from an event's publisher stamp (the
	// Reactord-Sent header, which reactord-bench's publisher sets) to the
	// event being handled; events without the stamp are not counted.
	SentLatency prometheus.Histogram
	// Shadow counts shadow mode's verdicts (shadow.Verdicts), by verdict.
	Shadow *prometheus.CounterVec
	// ShadowRunnerJobs counts the local jobs a runner of Salt's reactor
	// started (an orchestration's), which get no verdict (shadow mode).
	ShadowRunnerJobs prometheus.Counter
}

// SentLatencyBuckets are the upper bounds of
// reactord_event_sent_latency_seconds: fine around a few milliseconds, so
// that a p99 can be read against a 5 ms target.
var SentLatencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008,
	0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
}

// Reasons of reactord_dropped_total.
const (
	// DropLaneFull is the reason for an event dropped because its lane's
	// queue was full (core NATS mode).
	DropLaneFull = "lane_full"
	// DropSlowConsumer is the reason for events the NATS client dropped
	// before the daemon saw them: the core subscription's pending buffer
	// was full (a slow consumer).
	DropSlowConsumer = "slow_consumer"
)

// SuppressPartitionMoved is the reason of reactord_suppressed_total for an
// event queued in a replica that lost its partition before handling it
// (--partitions): the partition's new owner handles it.
const SuppressPartitionMoved = "partition_moved"

// NewMetrics creates the metrics and registers them on reg (nil: not
// registered), with the Go runtime's and the process's metrics (go_*,
// process_*: goroutines, heap, GC, resident memory, CPU, open files).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Events:  prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_events_total", Help: "Events received."}),
		Matched: prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_matched_total", Help: "Events that matched at least one rule."}),
		RuleMatches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reactord_rule_matches_total",
			Help: "Events whose tag a rule's glob matched, by the rule's glob (rules with the same glob add up)."}, []string{"rule"}),
		Malformed: prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_malformed_total", Help: "Events that could not be decoded (not a JSON envelope with a tag, data not a dictionary, or a string that is not valid UTF-8); dropped."}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reactord_dropped_total",
			Help: "Events dropped without any reaction, by reason (lane_full: a lane queue was full; slow_consumer: the NATS client's buffer for the subscription was full; core NATS mode only)."}, []string{"reason"}),
		ArchiveDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_archive_dropped_total",
			Help: "Events reacted to but not archived: the audit store's memory and disk spool were full (core NATS mode; JetStream leaves them for redelivery). Their records are in reactord_store_records_dropped_total."}),
		RenderErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_render_errors_total", Help: "Reaction files that failed to render, and events whose reactions verify_high discarded."}),
		Suppressed:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reactord_suppressed_total", Help: "Events or reactions suppressed, by reason."}, []string{"reason"}),
		Actions:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reactord_actions_total", Help: "Reactions dispatched, by driver and outcome."}, []string{"driver", "state"}),
		ActionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "reactord_action_duration_seconds", Help: "Time to dispatch one reaction.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"driver"}),
		DeadLetters: prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_dead_letters_total", Help: "Reactions given up after retries and sent to the dead-letter subject."}),
		Parked: prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_events_parked_total",
			Help: "Events not handled because the daemon died while handling them several times; each is published to the parked subject (--parked-subject) and in the ledger."}),
		ReloadOK:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "reactord_config_last_reload_successful", Help: "1 if the last configuration (re)load succeeded."}),
		QueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "reactord_queue_depth", Help: "Events waiting in lane queues."}),
		ConcurrencyQueued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "reactord_concurrency_queued",
			Help: "Events waiting, unacknowledged, for a slot of a rule's concurrency limit."}),
		HandedOver: prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_dispatches_handed_over_total",
			Help: "Reactions whose driver call a lane handed over: the driver had not answered when the call's request left (or within --hand-over-after, 50 ms by default, for a driver that does not say) and the lane went on with its next event, the call completing beside it (--in-flight)."}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reactord_retries_total",
			Help: "A rule's retry option at work, by outcome: retried (a job run again on the minions where it failed), succeeded (a retry left no failure), gave_up (failures left after the last attempt), resumed (a pending retry taken up when its event came back after a stop or crash, on this replica or another)."}, []string{"outcome"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reactord_event_latency_seconds", Help: "From receipt of an event to the dispatch of its reactions.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
		SentLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reactord_event_sent_latency_seconds",
			Help:    "From the publisher's send stamp (the Reactord-Sent header, set by reactord-bench's publisher) to the event being handled (reactions dispatched, or none due); events without the stamp are not counted.",
			Buckets: SentLatencyBuckets}),
		Shadow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reactord_shadow_total",
			Help: "Shadow mode (reactord shadow): decisions compared with what Salt's reactor did, by verdict (agree, differ, reactord-only, salt-only, ambiguous, and held-* for what reactord holds back on purpose: held-loop, held-hops, held-forged, held-throttle, held-debounce, held-collect)."}, []string{"verdict"}),
		ShadowRunnerJobs: prometheus.NewCounter(prometheus.CounterOpts{Name: "reactord_shadow_runner_jobs_total",
			Help: "Shadow mode: local jobs of the master's user that started while a runner job of Salt's reactor ran (an orchestration's own jobs): the runner's, with no verdict of their own."}),
	}
	m.Dropped.WithLabelValues(DropLaneFull) // exported at 0 before the first drop
	m.Dropped.WithLabelValues(DropSlowConsumer)
	if reg != nil {
		reg.MustRegister(m.Events, m.Matched, m.RuleMatches, m.Malformed, m.Dropped, m.ArchiveDropped, m.RenderErrors, m.Suppressed, m.Actions, m.ActionDuration, m.DeadLetters, m.Parked, m.ReloadOK, m.QueueDepth, m.ConcurrencyQueued, m.HandedOver, m.Retries, m.Latency, m.SentLatency, m.Shadow, m.ShadowRunnerJobs)
	}
	return m
}

// RegisterDriverMetrics exports what a driver counts itself:
// reactord_driver_unconfirmed_total{driver} for a driver that publishes
// without waiting for each reaction's confirmation (the nats driver: the
// reactions whose confirming flush failed, which may not have reached the
// server). Other drivers add nothing.
func RegisterDriverMetrics(reg prometheus.Registerer, drv actions.Driver) {
	u, ok := drv.(interface{ Unconfirmed() int64 })
	if !ok {
		return
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_driver_unconfirmed_total",
		Help:        "Reactions published but not confirmed by the server (the connection failed or the confirming flush timed out): they may not have reached executors, and are not resent.",
		ConstLabels: prometheus.Labels{"driver": drv.Name()}},
		func() float64 { return float64(u.Unconfirmed()) }))
}

// RegisterStoreMetrics exports the audit store writer's counters on reg:
// records written, held in memory, in the disk spool, refused (dropped:
// the buffer and the spool were full, so nothing kept them) and rejected
// by the database, and failed writes.
func RegisterStoreMetrics(reg prometheus.Registerer, w *store.Writer) {
	stat := func(f func(store.WriterStats) float64) func() float64 {
		return func() float64 { return f(w.Stats()) }
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_store_records_written_total", Help: "Audit records (events, jobs, returns, ledger entries) written to the store."},
			stat(func(s store.WriterStats) float64 { return float64(s.Written) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_store_records_dropped_total", Help: "Audit records not kept: memory and the disk spool were full (JetStream events are then left for redelivery)."},
			stat(func(s store.WriterStats) float64 { return float64(s.Dropped) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_store_records_rejected_total", Help: "Audit records the database refused because of their data (logged)."},
			stat(func(s store.WriterStats) float64 { return float64(s.Rejected) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "reactord_store_write_failures_total", Help: "Store writes that failed and were retried."},
			stat(func(s store.WriterStats) float64 { return float64(s.Failures) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_store_pending_records", Help: "Audit records held in memory, not yet written."},
			stat(func(s store.WriterStats) float64 { return float64(s.Pending) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_store_spooled_records", Help: "Audit records in the disk spool, waiting for the database."},
			stat(func(s store.WriterStats) float64 { return float64(s.Spooled) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_store_spool_bytes", Help: "Size of the records in the disk spool."},
			stat(func(s store.WriterStats) float64 { return float64(s.SpoolBytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reactord_store_up", Help: "0 while writes to the audit store fail."},
			func() float64 {
				if w.DownSince().IsZero() {
					return 1
				}
				return 0
			}),
	)
}
