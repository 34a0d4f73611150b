package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// lifecycle is the frame of a process built of parts, the daemon's and the
// bridge's: parts start in order, each stacking its teardown; stop runs
// the teardowns in reverse, once, and is safe after a partial start; a
// part that can fail while running adds its check to /healthz.
type lifecycle struct {
	teardown []teardown
	stopOnce sync.Once
	stopErr  error

	healthMu  sync.Mutex
	health    []healthCheck
	notes     []func() string
	ready     atomic.Bool
	readyOnce sync.Once
	readyCh   chan struct{}
}

// teardown is one part's clean-up.
type teardown struct {
	part string
	fn   func(ctx context.Context) error
}

// part is one step of a start: its name (in errors and the docs' table)
// and its start.
type part struct {
	name  string
	start func(ctx context.Context) error
}

// healthCheck is one part's answer to /healthz: nil while it works.
type healthCheck struct {
	part  string
	check func() error
}

func newLifecycle() lifecycle { return lifecycle{readyCh: make(chan struct{})} }

// start starts parts in order; when one fails, the parts already started
// are taken down and its error is returned.
func (l *lifecycle) start(ctx context.Context, parts []part) error {
	for _, p := range parts {
		if err := p.start(ctx); err != nil {
			_ = l.stop(context.WithoutCancel(ctx))
			return err
		}
	}
	return nil
}

// push stacks a part's teardown.
func (l *lifecycle) push(part string, fn func(ctx context.Context) error) {
	l.teardown = append(l.teardown, teardown{part, fn})
}

// stop runs the teardowns in reverse, once; later calls return the same
// error, which names each part whose teardown failed.
func (l *lifecycle) stop(ctx context.Context) error {
	l.stopOnce.Do(func() {
		l.ready.Store(false)
		_, _ = sd.SdNotify(false, sd.SdNotifyStopping)
		var errs []error
		for i := len(l.teardown) - 1; i >= 0; i-- {
			t := l.teardown[i]
			if err := t.fn(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", t.part, err))
			}
		}
		l.stopErr = errors.Join(errs...)
	})
	return l.stopErr
}

// markReady marks the process as taking events: /healthz then asks the
// parts, and Ready's channel closes.
func (l *lifecycle) markReady() {
	l.ready.Store(true)
	l.readyOnce.Do(func() { close(l.readyCh) })
	// Under systemd's Type=notify the unit is started now: the consumers
	// are subscribed (no-op without $NOTIFY_SOCKET).
	_, _ = sd.SdNotify(false, sd.SdNotifyReady)
}

// Ready is closed once the process takes events.
func (l *lifecycle) Ready() <-chan struct{} { return l.readyCh }

// addHealth adds a part's check to /healthz.
func (l *lifecycle) addHealth(part string, check func() error) {
	l.healthMu.Lock()
	defer l.healthMu.Unlock()
	l.health = append(l.health, healthCheck{part, check})
}

// addNote adds a line /healthz shows after its verdict, whatever it is:
// how a part works now when that is not a failure (the master driver's
// engine not answering, its fallback in use). An empty note is not shown.
func (l *lifecycle) addNote(note func() string) {
	l.healthMu.Lock()
	defer l.healthMu.Unlock()
	l.notes = append(l.notes, note)
}

// Notes returns the parts' notes, one a line ("" with none).
func (l *lifecycle) Notes() string {
	l.healthMu.Lock()
	notes := append([]func() string(nil), l.notes...)
	l.healthMu.Unlock()
	var b strings.Builder
	for _, n := range notes {
		if s := n(); s != "" {
			b.WriteString(s + "\n")
		}
	}
	return b.String()
}

// Health returns nil when the process takes events and every part's check
// passes, else each failure, one per line, in start order.
func (l *lifecycle) Health() error {
	if !l.ready.Load() {
		return errors.New("not ready")
	}
	l.healthMu.Lock()
	checks := append([]healthCheck(nil), l.health...)
	l.healthMu.Unlock()
	var errs []error
	for _, c := range checks {
		if err := c.check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serveHTTP serves /metrics of reg and /healthz on addr, and whatever
// more routes adds; its teardown closes the server. It returns the
// address it listens on.
func (l *lifecycle) serveHTTP(addr string, reg *prometheus.Registry, log *slog.Logger, more func(*http.ServeMux)) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", configErr(fmt.Errorf("--http %s: %w", addr, err))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := l.Health(); err != nil {
			http.Error(w, err.Error()+"\n"+l.Notes(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok\n"+l.Notes())
	})
	if more != nil {
		more(mux)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	l.push("HTTP endpoints", func(context.Context) error {
		err := hs.Close()
		<-served // Serve returns once the listener is closed
		return err
	})
	log.Info("serving metrics", "addr", ln.Addr().String())
	return ln.Addr().String(), nil
}
