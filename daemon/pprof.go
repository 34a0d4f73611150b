package daemon

import (
	"net/http"
	"net/http/pprof"
)

// ServePprof mounts Go's runtime profiles (net/http/pprof) under
// /debug/pprof/ on mux, for --pprof: `go tool pprof
// http://ADDR/debug/pprof/heap` reads the live heap, .../goroutine?debug=2
// every goroutine's stack. The mux is the daemon's own, not
// http.DefaultServeMux, so nothing is served without the flag. The
// command line (/debug/pprof/cmdline) is not served: it may hold a
// password given as a flag.
func ServePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
