package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/reactord/reactord/internal/suggest"
)

// Streams are a command's standard input, output and error.
type Streams struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Func runs a command; args are its arguments, what its flags left.
type Func func(ctx context.Context, args []string, s Streams) int

// Command is one command of a program's table (the model is Caddy's
// RegisterCommand): the help, the package doc and the docs' list of
// commands are written from it, and it runs the command.
type Command struct {
	// Name is what selects it: "render", or "jobs list" for a
	// subcommand.
	Name string
	// Short is its one-line summary in the list of commands.
	Short string
	// Usage is its synopsis: "reactord render -c CONF ...".
	Usage string
	// Long says what it does and its exit codes, in its help.
	Long string
	// Flags defines the command's flags on fs and returns its function,
	// bound to their values.
	Flags func(fs *flag.FlagSet) Func
	// Main runs a command that reads its own flags (Flags nil) with its
	// whole command line. Without Flags and Main, the command is the
	// group of the commands its name begins: its help is theirs.
	Main Func
}

// Table is a program's commands, in the order its help lists them, and
// the help command that prints them (help, or help COMMAND).
type Table struct {
	// Program is the program's name, as typed: "reactord".
	Program string
	// Header and Footer are the help's text before and after the list
	// of commands.
	Header, Footer string
	// Commands are the commands.
	Commands []Command
}

// helpCommand is the table's own command, help.
func helpCommand() Command {
	return Command{Name: "help", Short: "print the commands, or a command's help (help COMMAND)"}
}

// Lookup returns the command args select and the arguments after its
// name (a subcommand's two words win over its group's one); nil when
// none does.
func (t *Table) Lookup(args []string) (*Command, []string) {
	if len(args) == 0 {
		return nil, nil
	}
	if len(args) > 1 {
		if c := t.find(args[0] + " " + args[1]); c != nil {
			return c, args[2:]
		}
	}
	return t.find(args[0]), args[1:]
}

// find returns the command named name, or nil.
func (t *Table) find(name string) *Command {
	for i := range t.Commands {
		if t.Commands[i].Name == name {
			return &t.Commands[i]
		}
	}
	return nil
}

// group returns the subcommands of group c.
func (t *Table) group(c *Command) []*Command {
	var subs []*Command
	for i := range t.Commands {
		if strings.HasPrefix(t.Commands[i].Name, c.Name+" ") {
			subs = append(subs, &t.Commands[i])
		}
	}
	return subs
}

// Run runs the command args name with the rest of args; an unknown
// command is a usage error saying which is near.
func (t *Table) Run(ctx context.Context, args []string, s Streams) int {
	if len(args) > 0 && args[0] == helpCommand().Name {
		return t.runHelp(args[1:], s)
	}
	c, rest := t.Lookup(args)
	switch {
	case c == nil:
		return t.Unknown(args[:min(len(args), 1)], s.Stderr)
	case c.Main != nil:
		return c.Main(ctx, rest, s)
	case c.Flags == nil:
		return t.runGroup(c, rest, s)
	}
	fs := NewFlags(c.Name, c.Usage, c.Long, s.Stderr)
	fn := c.Flags(fs)
	if ok, code := ParseFlags(fs, rest, s.Stdout); !ok {
		return code
	}
	return fn(ctx, fs.Args(), s)
}

// Unknown says that args name no command, and which is near; it
// returns ExitUsage.
func (t *Table) Unknown(args []string, w io.Writer) int {
	name := strings.Join(args, " ")
	names := make([]string, 0, len(t.Commands))
	for _, c := range t.Commands {
		names = append(names, c.Name)
	}
	hint := ""
	if near := suggest.Closest(name, names); near != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", near)
	}
	fmt.Fprintf(w, "%s: unknown command %q%s\nRun '%s help' for the commands.\n", t.Program, name, hint, t.Program)
	return ExitUsage
}

// runGroup runs group c given no subcommand: its help when asked for,
// else a usage error listing its subcommands.
func (t *Table) runGroup(c *Command, args []string, s Streams) int {
	if len(args) > 0 && (IsHelpArg(args[0]) || args[0] == "help") {
		t.Help(c, s.Stdout)
		return ExitOK
	}
	var usages []string
	for _, sub := range t.group(c) {
		usages = append(usages, sub.Usage)
	}
	fmt.Fprintf(s.Stderr, "usage: %s\nRun '%s help %s' for their flags.\n", strings.Join(usages, " | "), t.Program, c.Name)
	return ExitUsage
}

// Help writes the help of c: its synopsis, what it does and its flags;
// for a group, its summary and the help of each subcommand.
func (t *Table) Help(c *Command, w io.Writer) {
	switch {
	case c.Flags != nil:
		fs := NewFlags(c.Name, c.Usage, c.Long, w)
		c.Flags(fs)
		fs.Usage()
	case c.Main != nil:
		// It builds its flags itself: ask it.
		c.Main(context.Background(), []string{"--help"}, Streams{Stdin: strings.NewReader(""), Stdout: w, Stderr: w})
	default:
		fmt.Fprintf(w, "%s %s: %s\n", t.Program, c.Name, c.Long)
		for _, sub := range t.group(c) {
			fmt.Fprintln(w)
			t.Help(sub, w)
		}
	}
}

// runHelp prints the list of commands, or the help of the command args
// name.
func (t *Table) runHelp(args []string, s Streams) int {
	if len(args) == 0 {
		t.Usage(s.Stdout)
		return ExitOK
	}
	c, rest := t.Lookup(args)
	if c == nil || len(rest) > 0 {
		return t.Unknown(args, s.Stderr)
	}
	t.Help(c, s.Stdout)
	return ExitOK
}

// Usage writes the program's help: the header, the commands with their
// summaries, the footer.
func (t *Table) Usage(w io.Writer) {
	fmt.Fprint(w, t.Header)
	fmt.Fprint(w, "Commands:\n")
	fmt.Fprint(w, t.List("  "))
	fmt.Fprint(w, t.Footer)
}

// All is the table's commands and, last, its help command.
func (t *Table) All() []Command { return append(slices.Clip(t.Commands), helpCommand()) }

// List is the commands' names and summaries, help's last, one a line,
// each line beginning with indent, the summaries aligned.
func (t *Table) List(indent string) string {
	all := t.All()
	width := 0
	for _, c := range all {
		width = max(width, len(c.Name))
	}
	var b strings.Builder
	for _, c := range all {
		fmt.Fprintf(&b, "%s%-*s  %s\n", indent, width, c.Name, c.Short)
	}
	return b.String()
}
