package actions

import (
	"context"
	"errors"
	"strings"
)

// Router sends each reaction type to its own driver: the chosen driver for
// what it supports, and a fallback (the exec driver's salt-call) for the
// rest, e.g. caller reactions next to salt-api.
type Router struct {
	// Primary runs every type it supports.
	Primary Driver
	// Fallback runs the types Primary does not; may be nil.
	Fallback Driver
}

// Name implements Driver.
func (r Router) Name() string {
	if r.Fallback == nil {
		return r.Primary.Name()
	}
	return r.Primary.Name() + "+" + r.Fallback.Name()
}

// Supports implements Driver.
func (r Router) Supports(state string) bool {
	return r.Primary.Supports(state) || (r.Fallback != nil && r.Fallback.Supports(state))
}

// Do implements Driver.
func (r Router) Do(ctx context.Context, a Action) (Result, error) {
	if r.Fallback != nil && !r.Primary.Supports(a.Chunk.Str("state")) {
		return r.Fallback.Do(ctx, a)
	}
	return r.Primary.Do(ctx, a)
}

// AnswersAtOnce reports whether both drivers answer without a round trip
// to Salt.
func (r Router) AnswersAtOnce() bool {
	return answersAtOnce(r.Primary) && (r.Fallback == nil || answersAtOnce(r.Fallback))
}

// answersAtOnce reports whether d says it answers without a round trip
// to Salt.
func answersAtOnce(d Driver) bool {
	q, ok := d.(interface{ AnswersAtOnce() bool })
	return ok && q.AnswersAtOnce()
}

// SaysSent reports whether the driver that runs state's reactions calls
// Sent (see the package function SaysSent).
func (r Router) SaysSent(state string) bool {
	if r.Fallback != nil && !r.Primary.Supports(state) {
		return SaysSent(r.Fallback, state)
	}
	return SaysSent(r.Primary, state)
}

// Close implements Driver: it closes both drivers.
func (r Router) Close(ctx context.Context) error {
	err := r.Primary.Close(ctx)
	if r.Fallback != nil {
		err = errors.Join(err, r.Fallback.Close(ctx))
	}
	return err
}

// Probe implements Prober: it probes each driver that can be probed.
func (r Router) Probe(ctx context.Context) error {
	var err error
	for _, d := range []Driver{r.Primary, r.Fallback} {
		if p, ok := d.(Prober); ok {
			err = errors.Join(err, p.Probe(ctx))
		}
	}
	return err
}

// Status joins what each driver says of how it runs reactions now (the
// master driver's engine), for /healthz; "" when neither says anything.
func (r Router) Status() string {
	var parts []string
	for _, d := range []Driver{r.Primary, r.Fallback} {
		if s, ok := d.(interface{ Status() string }); ok {
			if st := s.Status(); st != "" {
				parts = append(parts, st)
			}
		}
	}
	return strings.Join(parts, "; ")
}

// SaltCall runs an execution function on the master through the first
// driver that can (reactions.SaltCaller).
func (r Router) SaltCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	type saltCaller interface {
		SaltCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error)
	}
	for _, d := range []Driver{r.Primary, r.Fallback} {
		if c, ok := d.(saltCaller); ok {
			return c.SaltCall(ctx, fun, args, kwargs)
		}
	}
	return nil, errors.New("no driver here runs Salt functions (saltapi and exec do)")
}

var _ Driver = Router{}
