package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// soakFault is a fault's line in the timeline: one when it starts (Phase
// "start") and one when it ends (Phase "end", with TookS and Err); T is
// the line's time, seconds since the soak's start.
type soakFault struct {
	T      float64 `json:"t"`
	Fault  string  `json:"fault"`
	Target string  `json:"target"`
	Phase  string  `json:"phase"`
	TookS  float64 `json:"took_s,omitempty"`
	Err    string  `json:"error,omitempty"`
}

// nemesis injects faults until ctx ends: it waits for a free slot (fewer
// than --overlap faults in progress), then --fault-every, then starts
// the next fault. With --overlap 1 a fault starts --fault-every after the
// previous one ended; with more, faults overlap when one lasts longer
// than --fault-every. Kinds and targets come from the seed in order, so
// a run is replayed by its seed (when they start depends on how long the
// faults before took).
func (s *soak) nemesis(ctx context.Context, start time.Time, stderr io.Writer) {
	if s.cfg.faultEvery <= 0 {
		return
	}
	r := rand.New(rand.NewPCG(s.cfg.seed, 2))
	slots := make(chan struct{}, max(1, s.cfg.overlap))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		select {
		case <-ctx.Done():
			<-slots
			return
		case <-time.After(s.cfg.faultEvery):
		}
		kinds := s.kinds()
		kind := kinds[r.IntN(len(kinds))]
		if len(s.cfg.schedule) > 0 {
			kind = s.cfg.schedule[i%len(s.cfg.schedule)]
		}
		target, locks, act := s.plan(kind, r)
		wg.Go(func() {
			defer func() { <-slots }()
			s.runFault(kind, target, locks, act, start, stderr)
		})
	}
}

// runFault takes the fault's targets (waiting while another fault holds
// one of them), records its start, runs it to its end and records that.
func (s *soak) runFault(kind, target string, locks []string, act func() error, start time.Time, stderr io.Writer) {
	unlock := s.lockTargets(locks)
	defer unlock()
	at := time.Now()
	since := func(t time.Time) float64 { return math.Round(t.Sub(start).Seconds()*1000) / 1000 }
	s.record(soakFault{T: since(at), Fault: kind, Target: target, Phase: "start"})
	err := act()
	end := soakFault{T: since(time.Now()), Fault: kind, Target: target, Phase: "end", TookS: math.Round(time.Since(at).Seconds()*1000) / 1000}
	if err != nil {
		end.Err = err.Error()
		fmt.Fprintf(stderr, "soak: %s of %s: %v\n", kind, target, err)
	}
	s.record(end)
	s.fmu.Lock()
	s.faults[kind]++
	s.faultLog = append(s.faultLog, soakFault{T: since(at), Fault: kind, Target: target, TookS: end.TookS, Err: end.Err})
	s.fmu.Unlock()
}

// lockTargets holds the named targets, in the order given, until the
// returned function is called: two faults never act on one process at
// once.
func (s *soak) lockTargets(names []string) func() {
	var held []*sync.Mutex
	for _, n := range names {
		s.fmu.Lock()
		if s.targetMu == nil {
			s.targetMu = map[string]*sync.Mutex{}
		}
		m := s.targetMu[n]
		if m == nil {
			m = &sync.Mutex{}
			s.targetMu[n] = m
		}
		s.fmu.Unlock()
		m.Lock()
		held = append(held, m)
	}
	return func() {
		for _, m := range held {
			m.Unlock()
		}
	}
}

// auditTarget names the audit database in the timeline and its lock.
const auditTarget = "audit database"

// plan chooses a fault's target with r and returns its name, the targets
// it holds while it runs, and the fault itself, which runs to its end
// (the process back, the cut healed).
func (s *soak) plan(kind string, r *rand.Rand) (string, []string, func() error) {
	switch kind {
	case faultNATSKill:
		p := s.nodes[r.IntN(len(s.nodes))]
		return p.name, []string{p.name}, func() error { return s.restart(p, syscall.SIGKILL) }
	case faultReplicaKill, faultReplicaTerm:
		p := s.reps[r.IntN(len(s.reps))]
		sig := syscall.SIGKILL
		if kind == faultReplicaTerm {
			sig = syscall.SIGTERM
		}
		return p.name, []string{p.name}, func() error { return s.restart(p, sig) }
	case faultNetCut:
		p := s.reps[r.IntN(len(s.reps))]
		return p.name, []string{p.name}, func() error {
			for _, px := range p.proxies {
				px.Down()
			}
			time.Sleep(s.cfg.down)
			var errs []error
			for _, px := range p.proxies {
				errs = append(errs, px.Up())
			}
			return errors.Join(errs...)
		}
	case faultStoreCut:
		return auditTarget, []string{auditTarget}, func() error {
			s.storeProxy.Down()
			time.Sleep(2 * s.cfg.down)
			return s.storeProxy.Up()
		}
	case faultDBRestart:
		return s.db.kind + " server", []string{auditTarget}, func() error { return s.db.restart(2 * s.cfg.down) }
	case faultBridgeKill:
		return s.bridge.name, []string{s.bridge.name}, func() error { return s.restart(s.bridge, syscall.SIGKILL) }
	case faultDiskFull:
		i := r.IntN(len(s.reps))
		return s.reps[i].name, []string{s.reps[i].name}, func() error { return fillDisk(s.mounts[i], 2*s.cfg.down) }
	case faultReload:
		var names []string
		for _, p := range s.reps {
			names = append(names, p.name)
		}
		return "all replicas", names, s.reload
	}
	return "", nil, func() error { return fmt.Errorf("unknown fault %q", kind) }
}

// reload changes the reaction file and sends every replica SIGHUP,
// waiting for each to say it reloaded.
func (s *soak) reload() error {
	s.fmu.Lock()
	s.generation++
	generation := s.generation
	s.fmu.Unlock()
	before := make([]int64, len(s.reps))
	for i, p := range s.reps {
		before[i] = p.cur().reloads.Load()
	}
	if _, err := writeSoakConf(s.dir, generation); err != nil {
		return err
	}
	var errs []error
	for i, p := range s.reps {
		c := p.cur()
		if err := signalChild(c, syscall.SIGHUP); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			continue
		}
		// The reload is done when the replica says so.
		if err := waitFor(context.Background(), 20*time.Second, []*child{c}, func() error {
			if c.reloads.Load() <= before[i] {
				return errors.New("no \"configuration reloaded\" logged")
			}
			return nil
		}); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
		}
	}
	return errors.Join(errs...)
}

// fillDisk writes a file into dir until the file system is full, keeps
// it for hold, and removes it.
func fillDisk(dir string, hold time.Duration) error {
	path := filepath.Join(dir, "soak-fill")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				f.Close()
				return fmt.Errorf("filling %s: %w", dir, err)
			}
			break
		}
	}
	time.Sleep(hold)
	return f.Close()
}

// restart signals a process, waits for it to end, leaves it down for a
// while and starts it again, until its /healthz answers (a replica, the
// bridge and a NATS node serve one).
func (s *soak) restart(p *soakProc, sig syscall.Signal) error {
	c := p.cur()
	if err := signalChild(c, sig); err != nil {
		return err
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	time.Sleep(s.cfg.down)
	if err := p.start(s.self); err != nil {
		return err
	}
	if !p.http {
		return nil
	}
	return waitFor(context.Background(), 60*time.Second, []*child{p.cur()}, func() error { return p.cur().healthy() })
}
