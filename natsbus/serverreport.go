package natsbus

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ServerReport is what a NATS server offers reactord (reactord check
// --nats): its version, JetStream, and each feature of Features.
type ServerReport struct {
	URL     string `json:"url"`
	Version string `json:"version,omitempty"`
	// ServersSeen is how many servers of the cluster told their
	// version; Version is the lowest of them.
	ServersSeen  int             `json:"servers_seen,omitempty"`
	JetStream    bool            `json:"jetstream"`
	JetStreamWhy string          `json:"jetstream_why,omitempty"`
	Features     []FeatureStatus `json:"features"`
	// Error is why the server could not be asked.
	Error string `json:"error,omitempty"`
}

// FeatureStatus is one feature on a server.
type FeatureStatus struct {
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

// CheckServer asks conn's server what it offers and returns its report
// (with rep.URL, the connection's URL, as the server's answer names it);
// the problems are the features enabled (by name) that the server
// refuses and the daemon would not start without, or why the server
// could not be asked.
func CheckServer(ctx context.Context, conn *Conn, enabled map[string]bool) (rep ServerReport, problems []error) {
	rep.Features = []FeatureStatus{}
	sv, err := conn.ServerVersion(ctx)
	if err != nil {
		rep.Error = err.Error()
		return rep, []error{fmt.Errorf("nats: %w", err)}
	}
	rep.URL, rep.Version, rep.ServersSeen = sv.URL, sv.Version.String(), sv.Seen
	rep.JetStream, rep.JetStreamWhy = conn.JetStreamEnabled(ctx)
	for _, f := range Features() {
		st := FeatureStatus{Feature: f.Name, What: f.What, Min: f.Min().String(), Status: "works", Enabled: enabled[f.Name]}
		err := f.Check(sv)
		if err == nil && !rep.JetStream {
			err = errors.New(f.Name + " needs JetStream: " + rep.JetStreamWhy)
		}
		var fe *FeatureError
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
			if st.Enabled && (f.Fallback == "" || f.Name == FeatureJetStream.Name) {
				problems = append(problems, fmt.Errorf("nats: the configuration turns on %s, which %s refuses: %s", f.Name, sv.URL, err))
			}
		}
		rep.Features = append(rep.Features, st)
	}
	return rep, problems
}

// WriteText writes rep, one line a fact.
func (rep *ServerReport) WriteText(w io.Writer) {
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
