package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// healthCheck is one part's answer to /healthz: nil while it works.
type healthCheck struct {
	part  string
	check func() error
}

// addHealth adds a part's check to /healthz.
func (d *Daemon) addHealth(part string, check func() error) {
	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	d.health = append(d.health, healthCheck{part, check})
}

// Health returns nil when the daemon takes events and every part's check
// passes, else the first failure. The audit store is not among them:
// reactions go on while it is down (see StoreHealth).
func (d *Daemon) Health() error {
	if !d.ready.Load() {
		return errors.New("not ready")
	}
	d.healthMu.Lock()
	checks := append([]healthCheck(nil), d.health...)
	d.healthMu.Unlock()
	for _, c := range checks {
		if err := c.check(); err != nil {
			return err
		}
	}
	return nil
}

// StoreHealth returns nil while the audit store answers (or there is
// none), else how long it has failed and what waits for it.
func (d *Daemon) StoreHealth() error {
	if d.archive == nil {
		return nil
	}
	if since := d.archive.W.DownSince(); !since.IsZero() {
		st := d.archive.W.Stats()
		return fmt.Errorf("audit store failing for %s; %d records in memory, %d in the disk spool", time.Since(since).Round(time.Second), st.Pending, st.Spooled)
	}
	return nil
}

// serveHTTP serves /metrics, /healthz and /healthz/store on --http.
func (d *Daemon) serveHTTP(context.Context) error {
	if d.opts.HTTP == "" {
		return nil
	}
	ln, err := net.Listen("tcp", d.opts.HTTP)
	if err != nil {
		return configErr(fmt.Errorf("--http %s: %w", d.opts.HTTP, err))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := d.Health(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	// The store is a separate check: reactions go on while it is down
	// (records wait in the spool), so it does not fail /healthz.
	mux.HandleFunc("/healthz/store", func(w http.ResponseWriter, _ *http.Request) {
		if d.archive == nil {
			fmt.Fprintln(w, "no store")
			return
		}
		if err := d.StoreHealth(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	d.httpAddr = ln.Addr().String()
	d.push("HTTP endpoints", func(context.Context) error { return hs.Close() })
	d.log.Info("serving metrics", "addr", d.httpAddr)
	return nil
}
