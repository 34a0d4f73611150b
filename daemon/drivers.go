package daemon

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	osuser "os/user"
	"strings"
	"time"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/execdriver"
	"github.com/reactord/reactord/actions/masterdriver"
	"github.com/reactord/reactord/actions/natsdriver"
	"github.com/reactord/reactord/actions/saltapi"
	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/internal/redact"
	"github.com/reactord/reactord/natsbus"
)

// DriverOptions configure the drivers.
type DriverOptions struct {
	// ExecSubject is the nats driver's subject prefix.
	ExecSubject string
	// salt-api
	APIURL, APIUser, APIPassword, APIEAuth, APIToken, APICA string
	APIPasswordFile, APITokenFile                           string
	APIInsecure                                             bool
	APIMaxInFlight, APIMaxBatch, APIMaxMerge                int
	// the salt programs
	SaltBin, SaltRunBin, SaltCallBin string
	ExecTimeout, KillGrace           time.Duration
	SaltConfigDir                    string
	ExecMaxProcs, ExecCoalesce       int
	// the master driver
	MasterURI, MasterKeyFile, MasterUser, MasterEngine string
	MasterSockets                                      int
	// Log receives the drivers' own lines (the saltapi driver's moves
	// between masters); nil means slog.Default().
	Log *slog.Logger
}

// Flags registers the drivers' flags, their defaults f's values.
func (f *DriverOptions) Flags(fs *flag.FlagSet) {
	fs.StringVar(&f.ExecSubject, "exec-subject", f.ExecSubject, "nats driver: subject prefix reactions are published under (<prefix><state>)")
	fs.StringVar(&f.APIURL, "saltapi-url", f.APIURL, "saltapi driver: salt-api base URL; several, comma-separated (one per master of a multi-master Salt), fail over in order on failures that started no job")
	fs.StringVar(&f.APIUser, "saltapi-user", f.APIUser, "saltapi driver: eauth user")
	fs.StringVar(&f.APIPassword, "saltapi-password", f.APIPassword, "saltapi driver: eauth password (shows in ps: prefer --saltapi-password-file or $"+EnvName("saltapi-password")+")")
	fs.StringVar(&f.APIPasswordFile, "saltapi-password-file", f.APIPasswordFile, "saltapi driver: file holding the eauth password")
	fs.StringVar(&f.APIEAuth, "saltapi-eauth", f.APIEAuth, autoHelp("saltapi driver: eauth backend (pam, ldap, ...)", "Salt's auto eauth module; none with a token alone"))
	fs.StringVar(&f.APIToken, "saltapi-token", f.APIToken, "saltapi driver: a session token from /login (shows in ps: prefer --saltapi-token-file or $"+EnvName("saltapi-token")+")")
	fs.StringVar(&f.APITokenFile, "saltapi-token-file", f.APITokenFile, "saltapi driver: file holding the session token")
	fs.StringVar(&f.APICA, "saltapi-ca", f.APICA, "saltapi driver: CA file for salt-api's certificate")
	fs.BoolVar(&f.APIInsecure, "saltapi-insecure", f.APIInsecure, "saltapi driver: do not verify salt-api's certificate (tests only)")
	fs.StringVar(&f.SaltBin, "salt-bin", f.SaltBin, programUsage("salt"))
	fs.StringVar(&f.SaltRunBin, "salt-run-bin", f.SaltRunBin, programUsage("salt-run")+" (wheel reactions with the master driver)")
	fs.StringVar(&f.SaltCallBin, "salt-call-bin", f.SaltCallBin, programUsage("salt-call")+" (caller reactions with the master and saltapi drivers)")
	fs.DurationVar(&f.ExecTimeout, "exec-timeout", f.ExecTimeout, "exec driver: timeout of one command")
	fs.DurationVar(&f.KillGrace, "exec-kill-grace", f.KillGrace, "exec driver: SIGTERM to SIGKILL grace")
	fs.StringVar(&f.SaltConfigDir, "salt-config-dir", f.SaltConfigDir, saltConfigDirUsage())
	fs.IntVar(&f.APIMaxInFlight, "saltapi-max-in-flight", f.APIMaxInFlight, "saltapi driver: requests to salt-api at once")
	fs.IntVar(&f.APIMaxBatch, "saltapi-max-batch", f.APIMaxBatch, "saltapi driver: reactions waiting for a request slot are sent together, up to this many in one POST (1: never)")
	fs.IntVar(&f.APIMaxMerge, "saltapi-merge", f.APIMaxMerge, "saltapi driver: waiting local reactions that differ only in their literal minion target become one job with a list target, up to this many (1: never)")
	intAuto(fs, &f.ExecMaxProcs, "exec-max-procs", "exec driver: salt/salt-run programs running at once", "the CPU count, 2 to 8")
	stringAuto(fs, &f.MasterURI, "master-uri", "master driver: the master's request server, tcp://HOST:PORT",
		"interface and ret_port of the master configuration in --salt-config-dir")
	stringAuto(fs, &f.MasterKeyFile, "master-key-file", "master driver: the key file the salt command reads", "CACHEDIR/.USER_key of the master configuration")
	stringAuto(fs, &f.MasterUser, "master-user", "master driver: the user jobs are published as, whose key file is read: root, the master's user, or a user in the master's publisher_acl",
		"the user reactord runs as")
	stringAuto(fs, &f.MasterEngine, "master-engine", "master driver: the socket of reactord's Salt engine (salt-engine/reactord.py in the master's engines:), which runs runner and wheel reactions and render-time Salt calls inside the master, as Salt's reactor does; off for none. When it does not answer, runners go through the master's request server and wheel reactions and calls through salt-run",
		"SOCK_DIR/reactord.ipc of the master configuration")
	fs.IntVar(&f.MasterSockets, "master-sockets", f.MasterSockets, "master driver: requests to the master in flight at once (one REQ socket each)")
	fs.IntVar(&f.ExecCoalesce, "exec-coalesce", f.ExecCoalesce, "exec driver: waiting local reactions that differ only in their literal minion target share one salt -L run, up to this many (1: never)")
}

// master returns the master driver, with the exec driver's salt-call for
// caller reactions, and its salt-run for wheel reactions and render-time
// calls when reactord's Salt engine does not answer (the master's wheel
// clear function holds a master worker until it returns).
func (f *DriverOptions) master() (actions.Driver, error) {
	dir := f.SaltConfigDir
	if dir == "" {
		dir = DefaultMasterSaltConfigDir
	}
	mc, err := masterdriver.ReadMasterConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("--driver master: %w (--salt-config-dir names Salt's configuration directory)", err)
	}
	user := f.MasterUser
	if user == "" {
		user = "root"
		if u, err := osuser.Current(); err == nil {
			user = u.Username
		}
	}
	exec, err := f.Exec()
	if err != nil {
		return nil, err
	}
	m, err := masterdriver.New(masterdriver.Config{Master: mc, User: user, KeyFile: f.MasterKeyFile, URI: f.MasterURI, Sockets: f.MasterSockets,
		Engine: f.MasterEngine, Fallback: exec, Log: f.Log})
	if err != nil {
		return nil, fmt.Errorf("--driver master: %w", err)
	}
	return actions.Router{Primary: m, Fallback: exec}, nil
}

// ProbeSaltAPI checks, as the daemon does at its start, that salt-api
// answers at APIURL and the credentials log in; it says what it found.
// check probes it this way when the configuration chooses saltapi.
func (f *DriverOptions) ProbeSaltAPI(ctx context.Context) (string, error) {
	drv, err := f.Driver("saltapi", nil, nil)
	if err == nil {
		defer drv.Close(ctx)
		if p, ok := drv.(actions.Prober); ok {
			pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			err = p.Probe(pctx)
			cancel()
		}
	}
	if err != nil {
		return "", fmt.Errorf("driver saltapi: %w (check --offline skips this)", err)
	}
	what := "answers"
	if f.APIUser != "" {
		what = "answers and the credentials log in"
	}
	return fmt.Sprintf("driver saltapi: %s %s", f.APIURL, what), nil
}

// ProbeMasterEngine asks whether reactord's Salt engine listens for the
// master driver: the note when it does, the warning when it does not
// (runner and wheel reactions and render-time calls then leave the
// master's process: slower, but they run). Both are "" with the engine
// off.
func (f *DriverOptions) ProbeMasterEngine(ctx context.Context) (note, warning string) {
	if f.MasterEngine == "off" {
		return "", ""
	}
	path := f.MasterEngine
	if path == "" {
		mc, err := masterdriver.ReadMasterConfig(cmp.Or(f.SaltConfigDir, DefaultMasterSaltConfigDir))
		if err != nil {
			return "", fmt.Sprintf("driver master: %v", err)
		}
		path = mc.EngineSocket()
	}
	e := masterdriver.NewEngine(path, slog.New(slog.DiscardHandler))
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if e.Check(pctx) != nil {
		return "", "driver master: " + e.Status()
	}
	return "driver master: " + e.Status(), ""
}

// APIURLs returns the salt-api URLs of --saltapi-url: one, or several
// separated by commas, one per master of a multi-master Salt, in order of
// preference.
func (f *DriverOptions) APIURLs() ([]string, error) {
	if !strings.Contains(f.APIURL, ",") {
		return []string{f.APIURL}, nil
	}
	var urls []string
	for i, u := range strings.Split(f.APIURL, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			return nil, fmt.Errorf("saltapi: url list %q: entry %d is empty (separate the salt-api URLs with single commas)", redact.URLs(f.APIURL), i+1)
		}
		urls = append(urls, u)
	}
	return urls, nil
}

// ErrUnknownDriver reports a driver name that is none of the drivers.
var ErrUnknownDriver = errors.New("unknown driver")

// Exec returns the exec driver.
func (f *DriverOptions) Exec() (*execdriver.Driver, error) {
	cfg := execdriver.Config{Salt: f.SaltBin, SaltRun: f.SaltRunBin, SaltCall: f.SaltCallBin, Timeout: f.ExecTimeout, KillGrace: f.KillGrace,
		MaxProcs: f.ExecMaxProcs, MaxCoalesce: f.ExecCoalesce}
	if f.SaltConfigDir != "" {
		cfg.ExtraArgs = []string{"-c", f.SaltConfigDir}
	}
	return execdriver.New(cfg)
}

// Driver returns the driver name: dryrun writes to stdout, nats publishes
// on conn.
func (f *DriverOptions) Driver(name string, stdout io.Writer, conn *natsbus.Conn) (actions.Driver, error) {
	switch name {
	case "dryrun":
		if stdout == nil {
			stdout = io.Discard
		}
		return actions.NewDryRun(stdout), nil
	case "null":
		return actions.Null{}, nil
	case "nats":
		return natsdriver.New(conn, f.ExecSubject, fmt.Sprintf("reactord-%d", os.Getpid())), nil
	case "exec":
		return f.Exec()
	case "master":
		return f.master()
	case "saltapi":
		pw, err := SecretValue(f.APIPassword, EnvName("saltapi-password"), f.APIPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--saltapi-password-file: %w", err)
		}
		tok, err := SecretValue(f.APIToken, EnvName("saltapi-token"), f.APITokenFile)
		if err != nil {
			return nil, fmt.Errorf("--saltapi-token-file: %w", err)
		}
		eauth := f.APIEAuth
		if eauth == "auto" && f.APIUser == "" && pw == "" {
			eauth = "" // the default backend is no credential: a token alone logs in nothing
		}
		cfg := saltapi.Config{URL: f.APIURL, Username: f.APIUser, Password: pw, EAuth: eauth, Token: tok, CAFile: f.APICA, InsecureSkipVerify: f.APIInsecure,
			MaxInFlight: f.APIMaxInFlight, MaxBatch: f.APIMaxBatch, MaxMerge: f.APIMaxMerge}
		var api actions.Driver
		urls, err := f.APIURLs()
		switch {
		case err != nil:
		case len(urls) > 1:
			api, err = saltapi.NewFailover(saltapi.FailoverConfig{Config: cfg, URLs: urls, Logger: f.Log})
		default:
			api, err = saltapi.New(cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("--driver saltapi: %w (set --saltapi-url URL, and --saltapi-user, --saltapi-eauth and --saltapi-password-file or $%s, or --saltapi-token-file; or saltapi_url, saltapi_user, saltapi_eauth, saltapi_password_file in the reactord: section)",
				err, EnvName("saltapi-password"))
		}
		// salt-api cannot run caller reactions: salt-call runs them here.
		call, err := f.Exec()
		if err != nil {
			return nil, err
		}
		if call.Supports("caller") {
			return actions.Router{Primary: api, Fallback: call}, nil
		}
		return api, nil
	}
	return nil, fmt.Errorf("--driver %q: %w (known: %s)", name, ErrUnknownDriver, strings.Join(config.DriverNames, ", "))
}
