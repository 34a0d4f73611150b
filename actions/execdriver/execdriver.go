// Package execdriver is the exec driver: it dispatches reactions by running
// Salt's own command-line tools, salt, salt-run and salt-call, on the
// machine running reactord (normally the Salt master). Programs are started
// directly with an argument vector, never through a shell, in their own
// process group, with an explicit environment and a timeout enforced with
// SIGTERM and, after a grace period, SIGKILL, after the model of
// consul-template's child package.
//
// Programs run at once are bounded (Config.MaxProcs), and local reactions
// that wait for a free slot and differ only by a literal minion target share
// one salt run with a list target (Config.MaxCoalesce; see Driver.Do).
//
// Each reaction type maps onto one command line. Driver options always come
// first and a "--" ends them, so nothing taken from an event (a target, an
// argument) can ever be read as an option by Salt's optparse parsers, which
// otherwise accept options anywhere on the line:
//
//	local   salt --async EXTRA [TARGET-FLAG] [--return RET] -- TGT FUN ARG... KEY=VALUE...
//	runner  salt-run --async EXTRA -- FUN ARG... KEY=VALUE...
//	wheel   salt-run --async EXTRA -- salt.cmd saltutil.wheel FUN ARG... KEY=VALUE...
//	caller  salt-call EXTRA -- FUN ARG... KEY=VALUE...
//
// TARGET-FLAG is chosen from tgt_type as salt's TargetOptionsMixIn and
// ExtendedTargetOptionsMixIn define it (salt/utils/parsers.py): glob none,
// pcre -E, list -L (a list target is joined with commas), grain -G,
// grain_pcre --grain-pcre, pillar -I, pillar_pcre --pillar-pcre, nodegroup
// -N, range -R, compound -C, ipcidr -S. The salt command has no option for
// pillar_exact (nor does the compound matcher have a letter for it), so a
// pillar_exact reaction fails here and needs the saltapi driver.
//
// salt-run has no wheel client, so a wheel reaction runs the wheel function
// through the salt.cmd runner (which calls execution modules on the master)
// and the saltutil.wheel execution module (which calls WheelClient.cmd). The
// reported job ID is then the runner's. Because WheelClient.cmd parses its
// positional arguments a second time, string arguments of a wheel reaction
// are encoded twice; keyword arguments named fun, name or with_pillar are
// refused, as salt.cmd and saltutil.wheel would take them for their own.
//
// Arguments are written so that Salt's CLI parsing (parse_input and
// yamlify_arg in salt/utils/args.py) yields exactly the values of the low
// chunk: strings as they are when YAML reads them back unchanged, else
// double-quoted; numbers, booleans and null as YAML scalars; lists and
// mappings in YAML flow style; keyword arguments as key=value with the same
// value encoding.
//
// Runner and wheel reactions in Salt's legacy form, with keyword arguments
// written directly in the reaction body instead of under args or kwarg, pass
// those body keys (all but __id__, __sls__, name, order, fun, key, state and
// any __-prefixed key, Salt's REACTOR_INTERNAL_KEYWORDS) as key=value. Salt
// matches them against the function's signature and drops the unknown ones;
// salt-run cannot, so a function without **kwargs refuses a key it does not
// take. Other low-chunk keys (timeout, metadata, ...) have no command-line
// form and are not passed.
package execdriver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// Config configures a Driver. The zero value runs salt, salt-run and
// salt-call from the PATH with the default timeout, grace and environment.
type Config struct {
	// Salt, SaltRun and SaltCall are the programs to run, as paths or as
	// names looked up in the PATH of the child environment (see Env).
	// Defaults: "salt", "salt-run", "salt-call".
	Salt, SaltRun, SaltCall string
	// Timeout bounds one run of a program (default 30s). A run that takes
	// longer is stopped like a cancelled one and fails with ErrTimeout.
	Timeout time.Duration
	// KillGrace is how long a program may take to exit after SIGTERM
	// before its process group gets SIGKILL (default 5s).
	KillGrace time.Duration
	// Env is the complete environment of the programs, as KEY=VALUE
	// entries. When nil, the programs get only PATH, HOME, LANG, LC_ALL and
	// every SALT_* variable of reactord's own environment, as read by New.
	Env []string
	// ExtraArgs are options put before the driver's own on every command
	// line, e.g. {"-c", "/etc/salt"}. They may not contain "--".
	ExtraArgs []string
	// MaxProcs bounds the salt and salt-run programs running at once, and
	// separately the salt-call programs (which run their function to the
	// end, so they must not hold up job starts). Zero means
	// DefaultMaxProcs: the number of CPUs, at least 2 and at most 8. Each
	// start of a Salt CLI costs about 0.7 CPU-seconds of Python start-up,
	// so more programs than CPUs do not start jobs faster; they only
	// leave fewer reactions waiting to share a run.
	MaxProcs int
	// MaxCoalesce bounds how many waiting local reactions share one salt
	// run (see Driver.Do); zero means DefaultMaxCoalesce and 1 runs every
	// reaction on its own.
	MaxCoalesce int
}

// Defaults applied by New to zero Config fields.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultKillGrace   = 5 * time.Second
	DefaultMaxCoalesce = 32
	// DefaultSalt, DefaultSaltRun and DefaultSaltCall are the programs
	// run when Config names none, looked up in the PATH.
	DefaultSalt     = "salt"
	DefaultSaltRun  = "salt-run"
	DefaultSaltCall = "salt-call"
)

// DefaultMaxProcs is the bound on programs running at once that New
// applies when Config.MaxProcs is zero: the number of CPUs, at least 2 and
// at most 8.
func DefaultMaxProcs() int { return min(max(runtime.NumCPU(), 2), 8) }

// Errors reported by Do that callers may test with errors.Is.
var (
	// ErrTimeout is wrapped by the error of a program that ran longer than
	// Config.Timeout. Such an error is retryable.
	ErrTimeout = errors.New("timed out")
	// ErrNoMinions is wrapped by the error of a local reaction whose target
	// matched no minion, so that Salt started no job. It is not retryable.
	ErrNoMinions = errors.New("no minions matched the target")
)

// program is one Salt command-line tool as resolved by New.
type program struct {
	name string // as configured, for messages
	path string // resolved path; empty when err is set
	err  error
}

// Driver runs reactions through Salt's command-line tools. It is safe for
// concurrent use.
type Driver struct {
	salt, saltRun, saltCall program
	env                     []string
	timeout, killGrace      time.Duration
	extra                   []string
	maxCoalesce             int
	// jobs runs salt and salt-run, calls runs salt-call.
	jobs, calls pool
}

// New checks cfg, applies its defaults, snapshots the default environment
// and resolves the three programs. A program that cannot be found is not an
// error here: the reaction types it serves are then unsupported (Supports
// reports false and Validate says why), so that a configuration using only
// local reactions does not need salt-call installed.
func New(cfg Config) (*Driver, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("exec driver: negative timeout %s", cfg.Timeout)
	}
	if cfg.KillGrace < 0 {
		return nil, fmt.Errorf("exec driver: negative kill grace %s", cfg.KillGrace)
	}
	if cfg.MaxProcs < 0 {
		return nil, fmt.Errorf("exec driver: negative max procs %d", cfg.MaxProcs)
	}
	if cfg.MaxCoalesce < 0 {
		return nil, fmt.Errorf("exec driver: negative max coalesce %d", cfg.MaxCoalesce)
	}
	d := &Driver{timeout: cfg.Timeout, killGrace: cfg.KillGrace, extra: append([]string(nil), cfg.ExtraArgs...)}
	maxProcs := cmp.Or(cfg.MaxProcs, DefaultMaxProcs())
	d.jobs.max, d.calls.max = maxProcs, maxProcs
	d.maxCoalesce = cmp.Or(cfg.MaxCoalesce, DefaultMaxCoalesce)
	if d.timeout == 0 {
		d.timeout = DefaultTimeout
	}
	if d.killGrace == 0 {
		d.killGrace = DefaultKillGrace
	}
	for _, a := range d.extra {
		if a == "--" {
			return nil, errors.New(`exec driver: extra arguments may not contain "--"`)
		}
	}
	if cfg.Env != nil {
		for _, kv := range cfg.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return nil, fmt.Errorf("exec driver: environment entry %q is not KEY=VALUE", kv)
			}
		}
		d.env = append([]string{}, cfg.Env...)
	} else {
		d.env = defaultEnv(os.Environ())
	}
	pathList := ""
	for _, kv := range d.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v
		}
	}
	d.salt = resolve(cfg.Salt, DefaultSalt, pathList)
	d.saltRun = resolve(cfg.SaltRun, DefaultSaltRun, pathList)
	d.saltCall = resolve(cfg.SaltCall, DefaultSaltCall, pathList)
	return d, nil
}

// defaultEnv keeps PATH, HOME, LANG, LC_ALL and SALT_* from environ. The
// result is never nil: a nil exec.Cmd.Env would mean reactord's whole
// environment.
func defaultEnv(environ []string) []string {
	env := []string{}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "HOME", k == "LANG", k == "LC_ALL", strings.HasPrefix(k, "SALT_"):
			env = append(env, kv)
		}
	}
	return env
}

func resolve(name, def, pathList string) program {
	if name == "" {
		name = def
	}
	path, err := lookPath(name, pathList)
	return program{name: name, path: path, err: err}
}

// Name implements actions.Driver.
func (d *Driver) Name() string { return "exec" }

// Supports implements actions.Driver: local needs salt, runner and wheel
// need salt-run, caller needs salt-call.
func (d *Driver) Supports(state string) bool {
	p := d.program(state)
	return p != nil && p.err == nil
}

// Validate reports every program New could not find, for a configuration
// check to show along with the reactions that need it.
func (d *Driver) Validate() error {
	var errs []error
	for _, p := range []program{d.salt, d.saltRun, d.saltCall} {
		if p.err != nil {
			errs = append(errs, fmt.Errorf("exec driver: %s: %w", p.name, p.err))
		}
	}
	return errors.Join(errs...)
}

func (d *Driver) program(client string) *program {
	switch client {
	case "local":
		return &d.salt
	case "runner", "wheel":
		return &d.saltRun
	case "caller":
		return &d.saltCall
	}
	return nil
}

// Do implements actions.Driver: it maps the chunk onto a command line (see
// the package documentation), runs it and reports the job ID Salt printed:
// for local the one of "Executed command with job ID: JID" (ID 0 means no
// job: ErrNoMinions when no minion matched), for runner and wheel the one
// of the warning salt-run --async logs, "... running under tag
// salt/run/JID" (so salt-run's console log level must show warnings, its
// default), for caller none (salt-call runs synchronously).
//
// The program is stopped when Config.Timeout passes or ctx ends first:
// SIGTERM to its process group, then SIGKILL if it has not exited after
// Config.KillGrace. The error then wraps ErrTimeout or ctx.Err().
//
// Errors are retryable when the program timed out, when ctx's deadline
// passed, or when its output says the master could not be reached ("Salt
// request timed out", "The master is not responding", "Message timed out",
// "could not be contacted", "Is master running?", "is the Salt Master
// running?", "Attempt to authenticate with the salt master failed"). A
// chunk that cannot be expressed on a command line, a non-zero exit for any
// other reason (including "Failed to authenticate!", LocalClient's refusal
// to publish), a cancelled ctx, or output without the expected job ID is
// not retryable; the error quotes the last lines of stderr (or of stdout
// when stderr is empty).
//
// At most Config.MaxProcs salt and salt-run programs run at once (and as
// many salt-call programs); a reaction that finds them all busy waits in a
// queue, and one that finds a free slot starts at once. When a slot frees,
// the oldest waiting reaction runs, and if it is a coalescable local
// reaction, every waiting reaction that may share its run goes with it (up
// to Config.MaxCoalesce) as one `salt --async -L ID,ID,...` whose job
// reaches each minion: on a master with few CPUs, where each salt start
// costs about 0.7 CPU-seconds, this is what lets a burst of reactions start
// jobs faster than a few per second. Each Do then returns the shared jid
// with Minions set to its own target's minion ids; an error of the shared
// run is every sharer's (so a timed-out shared run is retryable for each
// of them, as a timed-out run of its own would be). A local reaction is
// coalescable when its target is literal minion ids: a glob without
// wildcard characters (*, ?, [ or ]), or a list, whose ids hold no comma
// or whitespace. Reactions share a run only when their function, arg,
// kwarg, ret and every other chunk key are identical (the compiler's
// bookkeeping aside: __id__, __sls__ and other __ keys, order, and name
// when it repeats __id__, none of which reach salt), their command lines
// are identical apart from the target, and their minions do not overlap,
// so that every reaction still starts its own job on each of its minions.
// salt -L silently skips ids without an accepted key, so a sharer whose
// minion is unknown gets the jid instead of ErrNoMinions.
//
// When ctx ends while the reaction waits, nothing runs. When it ends while
// a run of its own is in flight, the program is stopped as described
// above. When it ends during a shared run, Do returns at once with ctx's
// error, not retryable (the job may still start), and the run goes on for
// the others; it is stopped only once every sharer's ctx has ended.
func (d *Driver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	if a.Chunk == nil {
		return actions.Result{}, errors.New("action without a chunk")
	}
	call, err := actions.CallFor(a.Chunk)
	if err != nil {
		return actions.Result{}, err
	}
	inv, err := d.invocation(call, a.Chunk)
	if err != nil {
		return actions.Result{}, fmt.Errorf("%s %s: %w", call.Client, call.Fun, err)
	}
	j := &job{ctx: ctx, inv: inv, done: make(chan reply, 1)}
	if d.maxCoalesce > 1 {
		j.key, j.ids = coalesceKey(call, a.Chunk, inv)
	}
	p := &d.jobs
	if call.Client == "caller" {
		p = &d.calls
	}
	res, err := d.dispatch(ctx, p, j)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", call.Client, call.Fun, err)
	}
	return res, nil
}

// invocation is one command line to run.
type invocation struct {
	client string
	prog   *program
	args   []string
	// For local: flagAt is where the target-type flag is (hasFlag) or
	// would be, tgtAt where the target is.
	flagAt, tgtAt int
	hasFlag       bool
}

// targetFlags maps tgt_type onto the salt option selecting it.
var targetFlags = map[string]string{
	"glob":        "",
	"pcre":        "-E",
	"list":        "-L",
	"grain":       "-G",
	"grain_pcre":  "--grain-pcre",
	"pillar":      "-I",
	"pillar_pcre": "--pillar-pcre",
	"nodegroup":   "-N",
	"range":       "-R",
	"compound":    "-C",
	"ipcidr":      "-S",
}

// funPattern is what a Salt function name looks like. It keeps a name from
// being read as an option and, since salt reads a function list with commas
// as a compound command, from running more than one function.
var funPattern = regexp.MustCompile(`^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$`)

// reactorInternal are the chunk keys Salt's reactor never passes as
// keyword arguments (REACTOR_INTERNAL_KEYWORDS in salt/utils/reactor.py).
var reactorInternal = map[string]bool{"__id__": true, "__sls__": true, "name": true, "order": true, "fun": true, "key": true, "state": true}

// wheelReserved are keyword names the salt.cmd runner or the saltutil.wheel
// module would take for their own parameters.
var wheelReserved = map[string]bool{"fun": true, "name": true, "with_pillar": true}

func (d *Driver) invocation(call actions.Call, chunk *event.Chunk) (invocation, error) {
	return d.invocationFor(call, chunk, true)
}

// invocationFor builds the command line; requireProgram false lets
// Describe show it even where the program is not installed.
func (d *Driver) invocationFor(call actions.Call, chunk *event.Chunk, requireProgram bool) (invocation, error) {
	inv := invocation{client: call.Client, prog: d.program(call.Client)}
	if inv.prog == nil {
		return inv, fmt.Errorf("unknown reaction type %q", call.Client)
	}
	if requireProgram && inv.prog.err != nil {
		return inv, fmt.Errorf("%s is not available: %w", inv.prog.name, inv.prog.err)
	}
	if !funPattern.MatchString(call.Fun) {
		return inv, fmt.Errorf("function name %q is not of the form module.function", call.Fun)
	}
	var args []string
	switch call.Client {
	case "local":
		flag, ok := targetFlags[call.TgtType]
		if !ok {
			if call.TgtType == "pillar_exact" {
				return inv, errors.New(`tgt_type "pillar_exact" has no salt command-line option (salt offers glob, pcre, list, grain, grain_pcre, pillar, pillar_pcre, nodegroup, range, compound, ipcidr); use the saltapi driver`)
			}
			return inv, fmt.Errorf("unknown tgt_type %q", call.TgtType)
		}
		tgt, err := targetText(call.Tgt, call.TgtType)
		if err != nil {
			return inv, err
		}
		args = append(args, "--async")
		args = append(args, d.extra...)
		inv.flagAt = len(args)
		if flag != "" {
			args = append(args, flag)
			inv.hasFlag = true
		}
		ret, err := returnerText(call.Ret)
		if err != nil {
			return inv, err
		}
		if ret != "" {
			args = append(args, "--return", ret)
		}
		args = append(args, "--")
		inv.tgtAt = len(args)
		args = append(args, tgt, call.Fun)
	case "runner":
		args = append(args, "--async")
		args = append(args, d.extra...)
		args = append(args, "--", call.Fun)
	case "wheel":
		args = append(args, "--async")
		args = append(args, d.extra...)
		args = append(args, "--", "salt.cmd", "saltutil.wheel", call.Fun)
	case "caller":
		args = append(args, d.extra...)
		args = append(args, "--", call.Fun)
	}
	fargs, err := functionArgs(call, chunk)
	if err != nil {
		return inv, err
	}
	inv.args = append(args, fargs...)
	return inv, nil
}

// functionArgs encodes the function's positional and keyword arguments.
func functionArgs(call actions.Call, chunk *event.Chunk) ([]string, error) {
	var out []string
	for i, v := range call.Arg {
		s, err := argText(v)
		if _, isString := v.(string); isString && err == nil && call.Client == "wheel" {
			// WheelClient.cmd runs parse_input again on the string salt-run
			// parsed, so the string must survive two parses.
			s, err = stringText(s)
		}
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		out = append(out, s)
	}
	kw := call.Kwarg
	legacy := (call.Client == "runner" || call.Client == "wheel") && !chunk.Has("args") && !chunk.Has("kwarg")
	if legacy && call.Extra != nil {
		kw = event.NewMap(call.Extra.Len())
		for i := 0; i < call.Extra.Len(); i++ {
			k, v := call.Extra.At(i)
			if !reactorInternal[k] && !strings.HasPrefix(k, "__") {
				kw.Set(k, v)
			}
		}
	}
	if kw == nil {
		return out, nil
	}
	for i := 0; i < kw.Len(); i++ {
		k, v := kw.At(i)
		if call.Client == "wheel" && wheelReserved[k] {
			return nil, fmt.Errorf("keyword argument %q cannot reach a wheel function through salt.cmd and saltutil.wheel; use the saltapi driver", k)
		}
		s, err := kwargText(k, v)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// targetText writes a local reaction's tgt as salt's target argument.
func targetText(tgt any, tgtType string) (string, error) {
	switch t := tgt.(type) {
	case string:
		if t == "" {
			return "", errors.New("empty tgt")
		}
		return t, nil
	case int64, int, json.Number:
		return fmt.Sprint(t), nil
	case []any:
		if tgtType != "list" {
			return "", fmt.Errorf("tgt is a list but tgt_type is %q", tgtType)
		}
		if len(t) == 0 {
			return "", errors.New("empty tgt list")
		}
		ids := make([]string, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("tgt list item %d is %T, not a minion id", i+1, e)
			}
			if s == "" || strings.ContainsAny(s, ", \t\r\n") {
				return "", fmt.Errorf("tgt list item %q cannot be passed to salt -L (empty, or holds a comma or whitespace)", s)
			}
			ids[i] = s
		}
		return strings.Join(ids, ","), nil
	}
	return "", fmt.Errorf("tgt of type %T cannot be passed on the command line", tgt)
}

// returnerText writes ret (a returner name or a list of them) as the value
// of salt --return: names joined with commas, as LocalClient accepts them.
func returnerText(ret any) (string, error) {
	switch r := ret.(type) {
	case nil:
		return "", nil
	case string:
		return r, nil
	case []any:
		names := make([]string, len(r))
		for i, e := range r {
			s, ok := e.(string)
			if !ok || s == "" || strings.Contains(s, ",") {
				return "", fmt.Errorf("ret item %v is not a returner name", e)
			}
			names[i] = s
		}
		return strings.Join(names, ","), nil
	}
	return "", fmt.Errorf("ret of type %T is not a returner name", ret)
}

var (
	// jidLine is what salt --async prints (salt/cli/salt.py).
	jidLine = regexp.MustCompile(`Executed command with job ID: (\S+)`)
	// runTag is the end of the warning salt-run --async logs (salt/runner.py).
	runTag = regexp.MustCompile(`running under tag salt/run/([0-9]+(?:_[0-9]+)?)`)
)

// unreachable are fragments of the messages Salt's clients print when the
// master cannot be reached, lower-cased: SaltReqTimeoutError ("Salt request
// timed out. The master is not responding. ...", "Message timed out"),
// LocalClient.run_job ("The salt master could not be contacted. Is master
// running?"), LocalClient._check_pub_data ("Failed to connect to the
// Master, is the Salt Master running?") and salt.crypt's sign-in timeout
// ("Attempt to authenticate with the salt master failed with timeout
// error", seen from salt-call).
var unreachable = []string{
	"salt request timed out",
	"the master is not responding",
	"message timed out",
	"could not be contacted",
	"is master running",
	"is the salt master running",
	"attempt to authenticate with the salt master failed",
}

// masterUnreachable reports whether a program's output says the master
// could not be reached, which a later attempt may cure. "Failed to
// authenticate!" is deliberately not among them: LocalClient prints it when
// the publish was refused (the user may not run the command, or the
// master's disk failed), which retrying does not change.
func masterUnreachable(outputs ...[]byte) bool {
	for _, out := range outputs {
		low := strings.ToLower(string(out))
		for _, frag := range unreachable {
			if strings.Contains(low, frag) {
				return true
			}
		}
	}
	return false
}

// finish turns the outcome of a run into the driver's result.
func (d *Driver) finish(inv invocation, o outcome) (actions.Result, error) {
	name := filepath.Base(inv.prog.name)
	switch {
	case o.stop == stopTimeout:
		return actions.Result{}, actions.Retryable(fmt.Errorf("%s %w after %s (%s)%s", name, ErrTimeout, d.timeout, d.killNote(o), outputNote(o)))
	case o.stop == stopCanceled:
		err := fmt.Errorf("%s stopped: %w", name, o.ctxErr)
		if o.started {
			err = fmt.Errorf("%s stopped: %w (%s)", name, o.ctxErr, d.killNote(o))
		}
		if errors.Is(o.ctxErr, context.DeadlineExceeded) {
			return actions.Result{}, actions.Retryable(err)
		}
		return actions.Result{}, err
	case !o.started:
		return actions.Result{}, fmt.Errorf("starting %s: %w", name, o.err)
	case o.err != nil:
		var exitErr *exec.ExitError
		if !errors.As(o.err, &exitErr) {
			return actions.Result{}, fmt.Errorf("%s: %w", name, o.err)
		}
		err := fmt.Errorf("%s: %w%s", name, o.err, outputNote(o))
		if masterUnreachable(o.stdout, o.stderr) {
			return actions.Result{}, actions.Retryable(err)
		}
		return actions.Result{}, err
	}

	switch inv.client {
	case "local":
		m := jidLine.FindAllSubmatch(o.stdout, -1)
		if m == nil {
			return actions.Result{}, d.noJob(name+" printed no job ID", o)
		}
		jid := string(m[len(m)-1][1])
		if jid == "0" {
			if strings.Contains(string(o.stdout), "No minions matched the target") {
				return actions.Result{}, fmt.Errorf("%s: %w", name, ErrNoMinions)
			}
			return actions.Result{}, d.noJob(name+" started no job (job ID 0)", o)
		}
		return actions.Result{JID: jid}, nil
	case "runner", "wheel":
		m := runTag.FindAllSubmatch(append(append([]byte(nil), o.stderr...), o.stdout...), -1)
		if m == nil {
			return actions.Result{}, d.noJob(name+` printed no "running under tag salt/run/JID" warning (the runner did not start, or the console log level hides warnings)`, o)
		}
		return actions.Result{JID: string(m[len(m)-1][1])}, nil
	}
	return actions.Result{}, nil
}

// noJob is the error for a run that exited 0 without starting a job:
// retryable when the output says the master was unreachable.
func (d *Driver) noJob(msg string, o outcome) error {
	err := fmt.Errorf("%s%s", msg, outputNote(o))
	if masterUnreachable(o.stdout, o.stderr) {
		return actions.Retryable(err)
	}
	return err
}

// killNote says how a stopped program was ended.
func (d *Driver) killNote(o outcome) string {
	if o.killed {
		return fmt.Sprintf("sent SIGTERM to its process group, then SIGKILL after %s", d.killGrace)
	}
	return "sent SIGTERM to its process group"
}

// outputNote quotes the last lines of stderr, or of stdout when stderr is
// empty (salt prints some errors to stdout).
func outputNote(o outcome) string {
	if s := lastLines(o.stderr, 5); s != "" {
		return ": stderr: " + s
	}
	if s := lastLines(o.stdout, 5); s != "" {
		return ": stdout: " + s
	}
	return ""
}

// Close implements actions.Driver. The driver keeps no connection: each
// command runs under its reaction's context and ends with it (or its
// --exec-timeout), so there is nothing left to release.
func (d *Driver) Close(context.Context) error { return nil }

var _ actions.Driver = (*Driver)(nil)

// Describe returns the command line the driver would run for a, quoted for
// a POSIX shell (the driver itself uses no shell).
func (d *Driver) Describe(a actions.Action) (string, error) {
	call, err := actions.CallFor(a.Chunk)
	if err != nil {
		return "", err
	}
	inv, err := d.invocationFor(call, a.Chunk, false)
	if err != nil {
		return "", err
	}
	words := append([]string{inv.prog.name}, inv.args...)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " "), nil
}

// shellQuote quotes s for display in a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var _ actions.Describer = (*Driver)(nil)

// SaltCall runs an execution function on the master for a reaction file
// that calls Salt while rendering: `salt-run --out json salt.cmd FUN
// ARG... KEY=VALUE...`, arguments that are not strings written as JSON
// (which Salt's command line reads as YAML), answered with the function's
// return.
func (d *Driver) SaltCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	if !funPattern.MatchString(fun) {
		return nil, fmt.Errorf("exec: salt.cmd: %q is not a function name", fun)
	}
	if d.saltRun.err != nil {
		return nil, fmt.Errorf("exec: salt.cmd %s: %w", fun, d.saltRun.err)
	}
	cli := []string{"--out", "json"}
	cli = append(cli, d.extra...)
	cli = append(cli, "--", "salt.cmd", fun)
	word := func(v any) (string, error) {
		if s, ok := v.(string); ok {
			if strings.Contains(s, "#") {
				// Salt keeps an argument with a # as written when YAML
				// reads it as a string (salt.utils.args.yamlify_arg):
				// quotes would stay.
				return s, nil
			}
			b, err := json.Marshal(s) // quoted: the CLI must not read "yes" or "1" as YAML
			return string(b), err
		}
		b, err := json.Marshal(v)
		return string(b), err
	}
	for _, a := range args {
		w, err := word(a)
		if err != nil {
			return nil, fmt.Errorf("exec: salt.cmd %s: %w", fun, err)
		}
		cli = append(cli, w)
	}
	keys := make([]string, 0, len(kwargs))
	for k := range kwargs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w, err := word(kwargs[k])
		if err != nil {
			return nil, fmt.Errorf("exec: salt.cmd %s: %w", fun, err)
		}
		cli = append(cli, k+"="+w)
	}
	o := d.run(ctx, d.saltRun.path, cli)
	if o.err != nil || o.stop != stopNone {
		return nil, fmt.Errorf("exec: salt-run salt.cmd %s: %v%s", fun, cmp.Or(o.ctxErr, o.err, errors.New("stopped")), lastLine(o.stderr))
	}
	dec := json.NewDecoder(bytes.NewReader(o.stdout))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("exec: salt-run salt.cmd %s: output is not JSON: %.200q", fun, o.stdout)
	}
	if s, ok := v.(string); ok && (strings.HasPrefix(s, "Exception occurred in runner") || strings.HasPrefix(s, "'"+fun+"' is not available")) {
		return nil, fmt.Errorf("exec: salt-run salt.cmd %s: %s", fun, strings.SplitN(s, "\n", 2)[0])
	}
	return event.NormalizeNumbers(v), nil
}

// lastLine is ": " and the last non-empty line of out (a traceback's
// error), or "".
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return ": " + l
	}
	return ""
}
