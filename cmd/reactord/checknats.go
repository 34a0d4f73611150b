package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/reactord/reactord/daemon"
	"github.com/reactord/reactord/natsbus"
)

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
// offers (natsbus.CheckServer), or the connection's failure.
func checkNATS(ctx context.Context, nopts daemon.NATSOptions, enabled map[string]bool) (natsbus.ServerReport, []error) {
	copts, err := nopts.ConnOptions("reactord-check")
	var conn *natsbus.Conn
	if err == nil {
		conn, err = natsbus.Connect(copts)
	}
	if err != nil {
		return natsbus.ServerReport{URL: nopts.URL, Features: []natsbus.FeatureStatus{}, Error: err.Error()}, []error{fmt.Errorf("nats: %w", err)}
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep, problems := natsbus.CheckServer(ctx, conn, enabled)
	if rep.URL == "" {
		rep.URL = nopts.URL
	}
	return rep, problems
}
