package actions

import "context"

// Null is a driver that does nothing and succeeds: `reactord-bench` uses it
// to measure the pipeline without a Salt master.
type Null struct{}

// Name implements Driver.
func (Null) Name() string { return "null" }

// Supports implements Driver.
func (Null) Supports(string) bool { return true }

// Do implements Driver.
func (Null) Do(context.Context, Action) (Result, error) { return Result{}, nil }

// Close implements Driver: Null holds nothing.
func (Null) Close(context.Context) error { return nil }

var _ Driver = Null{}
