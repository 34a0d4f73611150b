package matchers

import (
	"errors"
	"fmt"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
	"github.com/reactord/reactord/internal/position"
)

// Expr is an expr-lang expression over an event, compiled once at load:
// `tag` is the event tag and `data` its data (missing keys are nil), e.g.
// `data.change == "IN_MODIFY" && tag endsWith "/important_file"`.
type Expr struct {
	src  string
	prog *vm.Program
	bool bool
}

// ExprError is a compile error at a line and column of the expression
// (1-based; no file: the caller places it in the configuration).
type ExprError = position.Error

func compile(src string, asBool bool) (*Expr, error) {
	opts := []expr.Option{expr.Env(map[string]any{"tag": "", "data": map[string]any{}}), expr.AllowUndefinedVariables()}
	if asBool {
		opts = append(opts, expr.AsBool())
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, position.At("", max(fe.Line, 1), fe.Column+1, fe.Message, err)
		}
		return nil, position.At("", 1, 1, err.Error(), err)
	}
	return &Expr{src: src, prog: prog, bool: asBool}, nil
}

// CompileCondition compiles a boolean condition.
func CompileCondition(src string) (*Expr, error) { return compile(src, true) }

// CompileKey compiles an expression whose value names a throttle or
// debounce key.
func CompileKey(src string) (*Expr, error) { return compile(src, false) }

// String returns the source.
func (e *Expr) String() string { return e.src }

// Eval runs the expression for one event.
func (e *Expr) Eval(tag string, data map[string]any) (any, error) {
	out, err := expr.Run(e.prog, map[string]any{"tag": tag, "data": data})
	if err != nil {
		return nil, fmt.Errorf("evaluating %q: %w", e.src, err)
	}
	return out, nil
}

// True evaluates a condition.
func (e *Expr) True(tag string, data map[string]any) (bool, error) {
	out, err := e.Eval(tag, data)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("condition %q gave %T, not a boolean", e.src, out)
	}
	return b, nil
}

// Key evaluates a key expression to a string.
func (e *Expr) Key(tag string, data map[string]any) (string, error) {
	out, err := e.Eval(tag, data)
	if err != nil {
		return "", err
	}
	return fmt.Sprint(out), nil
}
