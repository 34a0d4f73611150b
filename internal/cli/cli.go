// Package cli holds what reactord's commands share on the command line:
// the command table (Table, Command: each command's name, summary, usage,
// help, flags and function, from which the help is written), flag sets
// that print a described usage and name the flag an unknown one is near,
// former spellings of flags, the checks of numeric values, the exit codes
// and the printing of joined errors.
package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/reactord/reactord/internal/suggest"
)

// Exit codes of every command: success; the command ran but found errors;
// the command could not run (bad usage, unreadable input).
const (
	ExitOK    = 0
	ExitFound = 1
	ExitUsage = 2
)

// NewFlags returns a flag set that prints its usage with a description.
func NewFlags(name, synopsis, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n\nFlags:\n", synopsis, description)
		PrintFlags(fs)
	}
	return fs
}

// hiddenAlias is the Value of a former spelling of a flag, kept for one
// release: it sets the flag it stands for and is left out of the help.
type hiddenAlias struct{ flag.Value }

// hiddenBoolAlias is a hiddenAlias of a boolean flag (given without a
// value).
type hiddenBoolAlias struct{ hiddenAlias }

func (hiddenBoolAlias) IsBoolFlag() bool { return true }

// AliasFlag makes --old another spelling of the defined flag --name, left
// out of the help.
func AliasFlag(fs *flag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	usage := "former spelling of --" + name
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		fs.Var(hiddenBoolAlias{hiddenAlias{f.Value}}, old, usage)
		return
	}
	fs.Var(hiddenAlias{f.Value}, old, usage)
}

// isAlias reports whether f is a former spelling (AliasFlag).
func isAlias(f *flag.Flag) bool {
	switch f.Value.(type) {
	case hiddenAlias, hiddenBoolAlias:
		return true
	}
	return false
}

// PrintFlags prints the flags' help as PrintDefaults does, without the
// hidden aliases.
func PrintFlags(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if isAlias(f) {
			return
		}
		shown.Var(f.Value, f.Name, f.Usage)
		shown.Lookup(f.Name).DefValue = f.DefValue
	})
	shown.PrintDefaults()
}

// ParseFlags parses args and reports whether to go on; code is the exit
// code when not. Flags may come anywhere among the arguments (`fire TAG
// JSON --nats URL`), up to a "--" after which everything is an argument;
// a lone "-" (standard input) is an argument. A flag error prints the
// error (an unknown flag with the defined one it is near) and one line
// saying where the help is; asked-for help prints it all, to stdout.
func ParseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (ok bool, code int) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if IsHelpArg(a) {
			fs.SetOutput(stdout)
			fs.Usage()
			return false, ExitOK
		}
	}
	// The flag package prints its errors and the help itself: the
	// errors are printed here, with a hint, and the help is not.
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	positional, err := parseAnywhere(fs, args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err != nil {
		fmt.Fprintf(out, "%v%s\n", err, nearFlag(fs, err))
		HelpHint(fs)
		return false, ExitUsage
	}
	// Leave the arguments where fs.Args finds them.
	_ = fs.Parse(append([]string{"--"}, positional...))
	if err := CheckFlagValues(fs); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(out, "%s: %s\n", fs.Name(), line)
		}
		HelpHint(fs)
		return false, ExitUsage
	}
	return true, ExitOK
}

// parseAnywhere parses args with flags anywhere among the arguments and
// returns the arguments.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			// Parse stopped at "--": the rest are arguments.
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// undefinedFlag is how the flag package begins the error of a flag fs
// does not define.
const undefinedFlag = "flag provided but not defined: -"

// nearFlag is " (did you mean --NAME?)" when err is about an undefined
// flag one or two edits from a shown flag of fs, else "".
func nearFlag(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), undefinedFlag)
	if !ok || len(name) < 3 {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if !isAlias(f) {
			names = append(names, f.Name)
		}
	})
	if near := suggest.Closest(strings.ReplaceAll(name, "_", "-"), names); near != "" {
		return fmt.Sprintf(" (did you mean --%s?)", near)
	}
	return ""
}

// HelpHint prints, on the flag set's output, the line saying where its
// command's help is.
func HelpHint(fs *flag.FlagSet) {
	fmt.Fprintf(fs.Output(), "Run 'reactord help %s' for the flags.\n", fs.Name())
}

// UsageError prints "NAME: msg" (NAME the flag set's) and where the
// help is, on the flag set's output; it returns ExitUsage.
func UsageError(fs *flag.FlagSet, msg string) int {
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), msg)
	HelpHint(fs)
	return ExitUsage
}

// positiveFlags are the numeric flags whose 0 is refused too (every other
// numeric flag takes 0 as "the default" or "none").
var positiveFlags = map[string]bool{"drain-timeout": true, "max-payload": true}

// CheckFlagValues refuses the numeric flags given a negative value, and
// those of positiveFlags given 0, naming each.
func CheckFlagValues(fs *flag.FlagSet) error { return CheckValues(fs.Visit) }

// CheckValues checks as checkFlagValues the flags visit visits (fs.Visit:
// those given; fs.VisitAll: every one, once merged).
func CheckValues(visit func(func(*flag.Flag))) error {
	var errs []error
	visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var sign int
		switch v := g.Get().(type) {
		case int:
			sign = cmp.Compare(v, 0)
		case int64:
			sign = cmp.Compare(v, 0)
		case time.Duration:
			sign = cmp.Compare(v, 0)
		default:
			return
		}
		switch {
		case sign < 0:
			errs = append(errs, fmt.Errorf("invalid value %q for flag --%s: must not be negative", f.Value, f.Name))
		case sign == 0 && positiveFlags[f.Name]:
			errs = append(errs, fmt.Errorf("invalid value %q for flag --%s: must be more than 0", f.Value, f.Name))
		}
	})
	return errors.Join(errs...)
}

// IsHelpArg reports whether a is a request for help.
func IsHelpArg(a string) bool {
	return a == "-h" || a == "--h" || a == "-help" || a == "--help"
}

// PrintErrors prints each joined error on its own line.
func PrintErrors(w io.Writer, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			PrintErrors(w, e)
		}
		return
	}
	fmt.Fprintln(w, err)
}
