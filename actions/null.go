package actions

import "context"

// Null is a driver that does nothing and succeeds: `reactord-bench` uses it
// to measure the pipeline without a Salt master.
type Null struct{}

// Name implements Driver.
func (Null) Name() string { return "null" }

// AnswersAtOnce says Null runs nothing and answers at once.
func (Null) AnswersAtOnce() bool { return true }

// Supports implements Driver.
func (Null) Supports(string) bool { return true }

// Do implements Driver.
func (Null) Do(context.Context, Action) (Result, error) { return Result{}, nil }

// Close implements Driver: Null holds nothing.
func (Null) Close(context.Context) error { return nil }

var _ Driver = Null{}

// Shadow is the driver of shadow mode (reactord shadow): it dispatches
// nothing, as Null, under its own name; Salt's own reactor runs the jobs.
type Shadow struct{ Null }

// Name implements Driver.
func (Shadow) Name() string { return "shadow" }

// AnswersAtOnce says Shadow runs nothing and answers at once.
func (Shadow) AnswersAtOnce() bool { return true }

// ShowsActions reports that shadow mode's dispatches are its verdicts
// (logged and in the ledger), not lines of their own: they are logged at
// debug level (DispatchLevel).
func (Shadow) ShowsActions() bool { return true }

var _ Driver = Shadow{}
