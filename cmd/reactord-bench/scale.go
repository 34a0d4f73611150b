package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// scaleCell is one run of reactord-bench --scale: the floor (plain
// JetStream consumers), or the daemons with a number of replicas and of
// partitions (0: the shared consumer).
type scaleCell struct {
	Floor      bool
	Replicas   int
	Partitions int
	Res        benchReplicasResult
}

// parseScale reads --scale: replicas x partitions, each a comma-separated
// list ("1,2,3x0,1,3,6"; partitions 0 is the shared consumer).
func parseScale(spec string) (replicas, partitions []int, err error) {
	r, p, ok := strings.Cut(spec, "x")
	if !ok {
		return nil, nil, fmt.Errorf("--scale %q: want REPLICAS x PARTITIONS, e.g. 1,2,3x0,1,3,6", spec)
	}
	list := func(s string, lowest int) ([]int, error) {
		var out []int
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < lowest {
				return nil, fmt.Errorf("--scale %q: %q is not a number of at least %d", spec, f, lowest)
			}
			out = append(out, n)
		}
		return out, nil
	}
	if replicas, err = list(r, 1); err != nil {
		return nil, nil, err
	}
	partitions, err = list(p, 0)
	return replicas, partitions, err
}

// runScale runs the JetStream floor (one plain consumer), every cell of
// replicas × partitions, and the floor again, each on a NATS server of its
// own with the same workload, in this one invocation; it prints each
// run's JSON line as it ends, then a table of the CPU each event costs,
// per replica and against the floor, and, with plot, draws it to a PNG.
func runScale(ctx context.Context, base replicasBench, spec, plot string, stdout, stderr io.Writer) int {
	replicas, partitions, err := parseScale(spec)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	var cells []scaleCell
	run := func(c scaleCell) error {
		b := base
		b.replicas, b.partitions, b.floor = c.Replicas, c.Partitions, c.Floor
		b.dir = filepath.Join(base.dir, fmt.Sprintf("run%d", len(cells)+1))
		if err := os.MkdirAll(b.dir, 0o755); err != nil {
			return err
		}
		res, err := measureReplicas(ctx, b, stderr)
		if err != nil {
			return err
		}
		c.Res = res
		cells = append(cells, c)
		line, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", line)
		return nil
	}
	plan := []scaleCell{{Floor: true, Replicas: 1}}
	for _, r := range replicas {
		for _, p := range partitions {
			plan = append(plan, scaleCell{Replicas: r, Partitions: p})
		}
	}
	plan = append(plan, scaleCell{Floor: true, Replicas: 1})
	for _, c := range plan {
		if err := run(c); err != nil {
			fmt.Fprintf(stderr, "bench: %d replicas, %d partitions (floor %v): %v\n", c.Replicas, c.Partitions, c.Floor, err)
			return exitUsage
		}
	}
	return reportScale(cells, plot, stdout, stderr)
}

// floorFigures are the means of the floor runs: CPU ms per 1,000 events
// (consumer and NATS) and p99 latency; n counts the runs.
func floorFigures(cells []scaleCell) (cpu, p99 float64, n int) {
	for _, c := range cells {
		if c.Floor {
			cpu += c.Res.CPUms
			p99 += c.Res.P99ms
			n++
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return cpu / float64(n), p99 / float64(n), n
}

// writeScaleTable prints the runs as a Markdown table: the CPU time of
// reactord and NATS per 1,000 events, the replicas' own per 1,000 events
// each handled (the cost per event per replica), NATS's part, and the
// whole against the floor.
func writeScaleTable(w io.Writer, cells []scaleCell) {
	floor, floorP99, runs := floorFigures(cells)
	fmt.Fprintf(w, "\n| run | replicas | partitions | handled | events/s | cpu ms/1k (all) | reactord ms/1k | reactord less idle | idle ms/s per replica | NATS ms/1k | × floor | p99 ms |\n")
	fmt.Fprintf(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range cells {
		name, parts := "reactord", strconv.Itoa(c.Partitions)
		switch {
		case c.Floor:
			name, parts = "JetStream floor", "—"
		case c.Partitions == 0:
			parts = "shared"
		}
		ratio := "—"
		if floor > 0 {
			ratio = strconv.FormatFloat(c.Res.CPUms/floor, 'f', 2, 64)
		}
		var idle float64
		for _, r := range c.Res.PerReplica {
			idle += r.IdleCPUms / float64(len(c.Res.PerReplica))
		}
		fmt.Fprintf(w, "| %s | %d | %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %.1f |\n", name, c.Replicas, parts, c.Res.Handled, c.Res.EventsPerSec,
			c.Res.CPUms, c.Res.ReplicasCPUms, c.Res.ReplicasEventCPUms, idle, c.Res.NATSCPUms, ratio, c.Res.P99ms)
	}
	fmt.Fprintf(w, "\nfloor: %.1f CPU ms per 1,000 events (mean of %d runs), p99 %.1f ms\n", floor, runs, floorP99)
}

// replotScale prints the table and draws the plot of a saved --scale run.
func replotScale(from, plot string, stdout, stderr io.Writer) int {
	f, err := os.Open(from)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	defer f.Close()
	cells, err := readScale(f)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s: %v\n", from, err)
		return exitUsage
	}
	return reportScale(cells, plot, stdout, stderr)
}

// reportScale prints the table of the runs and, with plot, draws them.
func reportScale(cells []scaleCell, plot string, stdout, stderr io.Writer) int {
	writeScaleTable(stdout, cells)
	if plot != "" {
		if err := plotScale(plot, cells); err != nil {
			fmt.Fprintf(stderr, "bench: plot: %v\n", err)
			return exitUsage
		}
	}
	return exitOK
}
