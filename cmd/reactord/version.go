package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reactord/reactord/internal/cli"
)

// buildInfo says which reactord this is.
type buildInfo struct {
	// Version is the module version ("v1.2.3", a pseudo-version, or
	// "(devel)" for a build from a work tree).
	Version string
	// Commit is the VCS revision the binary was built from, with a
	// "-dirty" suffix when the work tree had changes; "unknown" without
	// VCS information (go run, go test, a build with -buildvcs=false).
	Commit string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// readBuildInfo reads the build information Go embeds in the binary.
func readBuildInfo() buildInfo {
	bi := buildInfo{Version: "(devel)", Commit: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	if v := info.Main.Version; v != "" {
		bi.Version = v
	}
	if info.GoVersion != "" {
		bi.GoVersion = info.GoVersion
	}
	var rev string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		bi.Commit = rev
		if modified {
			bi.Commit += "-dirty"
		}
	}
	return bi
}

// String is the line `reactord version` prints.
func (b buildInfo) String() string {
	return fmt.Sprintf("reactord %s (commit %s, %s)", b.Version, b.Commit, b.GoVersion)
}

// versionFlags defines version's flags and returns the command, which
// prints the version line (reactord version, reactord --version).
func versionFlags(fs *flag.FlagSet) cli.Func {
	out := fs.String("out", "text", `text, or json: {"version", "commit", "go_version"}`)
	return func(_ context.Context, args []string, s cli.Streams) int {
		if len(args) > 0 {
			return cli.UsageError(fs, "takes no arguments")
		}
		return printVersion(*out, s.Stdout, s.Stderr)
	}
}

// printVersion prints the version line as text or json.
func printVersion(out string, stdout, stderr io.Writer) int {
	bi := readBuildInfo()
	switch out {
	case "text":
		fmt.Fprintln(stdout, bi)
	case "json":
		b, _ := json.Marshal(map[string]string{"version": bi.Version, "commit": bi.Commit, "go_version": bi.GoVersion})
		fmt.Fprintf(stdout, "%s\n", b)
	default:
		fmt.Fprintf(stderr, "version: --out %q: want text or json\n", out)
		return exitUsage
	}
	return exitOK
}

// registerBuildInfo exports reactord_build_info, a gauge of 1 whose labels
// say which reactord is running.
func registerBuildInfo(reg prometheus.Registerer) {
	b := readBuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "reactord_build_info",
		Help:        "Always 1; the labels say which reactord runs: version, commit (with -dirty for a modified work tree) and goversion.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": b.GoVersion},
	})
	g.Set(1)
	reg.MustRegister(g)
}
