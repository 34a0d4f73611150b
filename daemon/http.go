package daemon

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

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

// serveHTTP serves /metrics, /healthz, /healthz/store and /rules on --http.
func (d *Daemon) serveHTTP(context.Context) error {
	if d.opts.HTTP == "" {
		return nil
	}
	addr, err := d.lifecycle.serveHTTP(d.opts.HTTP, d.reg, d.log, func(mux *http.ServeMux) {
		// The store is a separate check: reactions go on while it is down
		// (records wait in the spool), so it does not fail /healthz.
		mux.Handle("/rules", d.rules)
		if d.opts.Pprof {
			ServePprof(mux)
		}
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
	})
	d.httpAddr = addr
	return err
}
