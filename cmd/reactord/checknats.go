package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/natsbus"
)

// natsReport is what check --nats found about a NATS server: its
// version, JetStream, and each feature of natsbus.Features.
type natsReport struct {
	URL     string `json:"url"`
	Version string `json:"version,omitempty"`
	// ServersSeen is how many servers of the cluster told their
	// version; Version is the lowest of them.
	ServersSeen  int             `json:"servers_seen,omitempty"`
	JetStream    bool            `json:"jetstream"`
	JetStreamWhy string          `json:"jetstream_why,omitempty"`
	Features     []featureStatus `json:"features"`
	// Error is why the server could not be asked.
	Error string `json:"error,omitempty"`
}

// featureStatus is one feature on that server.
type featureStatus struct {
	Feature string `json:"feature"`
	What    string `json:"what"`
	Min     string `json:"min_version"`
	// Status is works, or refused (Reason says why; Fallback what the
	// daemon does instead, when it does not refuse to start).
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	Fallback string `json:"fallback,omitempty"`
	// Enabled: the configuration given with -c turns it on.
	Enabled bool `json:"enabled"`
}

// enabledFeatures returns the features the configuration turns on that
// the daemon cannot run without (refused rather than fallen back from):
// by flag name; nil without a configuration. An error says why the
// daemon's settings could not be merged from conf (none is checked then).
func enabledFeatures(conf string) (map[string]bool, error) {
	if conf == "" {
		return nil, nil
	}
	var errOut bytes.Buffer
	opts, _, _, code := mergedOptions([]string{"-c", conf}, io.Discard, &errOut)
	if code != exitOK {
		return nil, fmt.Errorf("nats: cannot merge the daemon's settings from %s, so the features it turns on were not checked against the server: %s",
			conf, strings.Join(strings.Fields(errOut.String()), " "))
	}
	return map[string]bool{
		natsbus.FeatureJetStream.Name:     opts.JetStream.Given && opts.JetStream.Value || opts.Partitions > 0 || opts.DedupeMasters > 0,
		natsbus.FeaturePartitions.Name:    opts.Partitions > 0,
		natsbus.FeatureSharedState.Name:   opts.SharedState,
		natsbus.FeatureDedupeMasters.Name: opts.DedupeMasters > 0,
	}, nil
}

// checkNATS connects to the server nopts names and reports what it
// offers; the problems are the features enabled (by flag name) that the
// server refuses and the daemon would not start without, or the
// connection's failure.
func checkNATS(ctx context.Context, nopts daemon.NATSOptions, enabled map[string]bool) (natsReport, []error) {
	rep := natsReport{URL: nopts.URL, Features: []featureStatus{}}
	copts, err := nopts.ConnOptions("reactord-check")
	if err != nil {
		rep.Error = err.Error()
		return rep, []error{fmt.Errorf("nats: %w", err)}
	}
	conn, err := natsbus.Connect(copts)
	if err != nil {
		rep.Error = err.Error()
		return rep, []error{fmt.Errorf("nats: %w", err)}
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sv, err := conn.ServerVersion(ctx)
	if err != nil {
		rep.Error = err.Error()
		return rep, []error{fmt.Errorf("nats: %w", err)}
	}
	rep.URL, rep.Version, rep.ServersSeen = sv.URL, sv.Version.String(), sv.Seen
	rep.JetStream, rep.JetStreamWhy = conn.JetStreamEnabled(ctx)
	var problems []error
	for _, f := range natsbus.Features() {
		st := featureStatus{Feature: f.Name, What: f.What, Min: f.Min().String(), Status: "works", Enabled: enabled[f.Name]}
		err := f.Check(sv)
		if err == nil && !rep.JetStream {
			err = errors.New(f.Name + " needs JetStream: " + rep.JetStreamWhy)
		}
		var fe *natsbus.FeatureError
		switch {
		case errors.As(err, &fe):
			st.Status = "refused"
			st.Reason = fmt.Sprintf("needs nats-server %s or later (%s) (server runs %s)", fe.Missing.Min, fe.Missing.API, sv.Version)
		case err != nil:
			st.Status, st.Reason = "refused", "needs JetStream ("+rep.JetStreamWhy+")"
		}
		if err != nil {
			st.Fallback = f.Fallback
			// The daemon falls back from JetStream delivery only when
			// --jetstream was not insisted on: enabled says it was.
			if st.Enabled && (f.Fallback == "" || f.Name == natsbus.FeatureJetStream.Name) {
				problems = append(problems, fmt.Errorf("nats: the configuration turns on %s, which %s refuses: %s", f.Name, sv.URL, err))
			}
		}
		rep.Features = append(rep.Features, st)
	}
	return rep, problems
}

// printNATSText prints rep, one line a fact.
func printNATSText(w io.Writer, rep *natsReport) {
	if rep.Error != "" {
		fmt.Fprintf(w, "nats: %s: cannot ask it: %s\n", rep.URL, rep.Error)
		return
	}
	seen := ""
	if rep.ServersSeen > 1 {
		seen = fmt.Sprintf(" (the lowest of %d servers seen)", rep.ServersSeen)
	}
	fmt.Fprintf(w, "nats: %s runs nats-server %s%s\n", rep.URL, rep.Version, seen)
	js := "off"
	if rep.JetStream {
		js = "on"
	}
	fmt.Fprintf(w, "nats: JetStream %s (%s)\n", js, rep.JetStreamWhy)
	for _, f := range rep.Features {
		line := fmt.Sprintf("feature %s: %s", f.Feature, f.Status)
		if f.Reason != "" {
			line += ": " + f.Reason
		}
		if f.Fallback != "" {
			line += "; the daemon falls back: " + f.Fallback
		}
		if f.Enabled {
			line += " [turned on by the configuration]"
		}
		fmt.Fprintln(w, line)
	}
}
