package daemon

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reactord/reactord/natsbus"
	"github.com/reactord/reactord/natsbus/embedded"
)

// NATSOptions are the connection settings the daemon, fire, events and
// bridge share.
type NATSOptions struct {
	URL                          string
	Token, TokenFile             string
	User, Password, PasswordFile string
	NKey, Creds                  string
	CA, Cert, Key                string
}

// Flags registers the connection flags; urlUsage is the help of --nats,
// which says what an empty URL does for the command.
func (n *NATSOptions) Flags(fs *flag.FlagSet, urlUsage string) {
	fs.StringVar(&n.URL, "nats", n.URL, urlUsage)
	fs.StringVar(&n.Token, "nats-token", n.Token, "NATS token (shows in ps: prefer --nats-token-file or $"+EnvName("nats-token")+"); empty: the token of reactord's embedded server at that address, when this user can read it")
	fs.StringVar(&n.TokenFile, "nats-token-file", n.TokenFile, "file holding the NATS token (reactord's embedded server: DATA_DIR/"+natsbus.TokenFileName+")")
	fs.StringVar(&n.User, "nats-user", n.User, "NATS user")
	fs.StringVar(&n.Password, "nats-password", n.Password, "NATS password (shows in ps: prefer --nats-password-file or $"+EnvName("nats-password")+")")
	fs.StringVar(&n.PasswordFile, "nats-password-file", n.PasswordFile, "file holding the NATS password")
	fs.StringVar(&n.NKey, "nats-nkey", n.NKey, "NATS NKey seed file")
	fs.StringVar(&n.Creds, "nats-creds", n.Creds, "NATS .creds file")
	fs.StringVar(&n.CA, "nats-ca", n.CA, "CA file for NATS TLS")
	fs.StringVar(&n.Cert, "nats-cert", n.Cert, "client certificate for NATS TLS")
	fs.StringVar(&n.Key, "nats-key", n.Key, "client key for NATS TLS")
}

// DefaultNATSURL is the embedded server's default address, where the
// bridge publishes when nothing says otherwise.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// Find fills in the URL when it was not given: $NATS_URL (as the nats CLI
// reads it), else the address the embedded server of a local daemon
// recorded in its data directory (dataDirs, then the user's default one,
// then the packaged service's): the first where a server answers, else
// the first recorded (a daemon killed without a stop leaves its address
// behind; a stopped one removes it). It
// reports false when there is none; where says where the URL came from.
func (n *NATSOptions) Find(dataDirs ...string) (where string, ok bool) {
	if n.URL != "" {
		return "--nats", true
	}
	if u := strings.TrimSpace(os.Getenv("NATS_URL")); u != "" {
		n.URL = u
		return "$NATS_URL", true
	}
	dirs := append(append([]string{}, dataDirs...), natsbus.DefaultDataDir(), natsbus.SystemDataDir)
	var first, firstDir string
	for _, d := range dirs {
		addr, dir := natsbus.LocalAddr(d)
		if addr == "" {
			continue
		}
		if first == "" {
			first, firstDir = addr, dir
		}
		if c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond); err == nil {
			c.Close()
			n.URL = "nats://" + addr
			return filepath.Join(dir, natsbus.AddrFileName), true
		}
	}
	if first != "" {
		n.URL = "nats://" + first
		return filepath.Join(firstDir, natsbus.AddrFileName) + " (nothing answers there)", true
	}
	return "", false
}

// ConnOptions returns the connection options, with the secrets read from
// their flags, files or environment variables. When none is given, the
// token of reactord's embedded server at the URL's address is used, found
// in dataDirs, then the default data directory, then the systemd unit's, if
// this user can read it; AuthHint says what to do when the server refuses.
func (n *NATSOptions) ConnOptions(name string, dataDirs ...string) (natsbus.ConnOptions, error) {
	token, err := SecretValue(n.Token, EnvName("nats-token"), n.TokenFile)
	if err != nil {
		return natsbus.ConnOptions{}, fmt.Errorf("--nats-token-file: %w", err)
	}
	password, err := SecretValue(n.Password, EnvName("nats-password"), n.PasswordFile)
	if err != nil {
		return natsbus.ConnOptions{}, fmt.Errorf("--nats-password-file: %w", err)
	}
	o := natsbus.ConnOptions{URL: n.URL, Name: name, Token: token, User: n.User, Password: password,
		NKeyFile: n.NKey, CredsFile: n.Creds, CAFile: n.CA, CertFile: n.Cert, KeyFile: n.Key}
	if token != "" || n.User != "" || n.NKey != "" || n.Creds != "" {
		o.AuthHint = "the server refused the credentials given (--nats-token, --nats-user, --nats-nkey, --nats-creds, their *-file flags or $" + EnvName("nats-token") + ")"
		return o, nil
	}
	dirs := append(append([]string{}, dataDirs...), natsbus.DefaultDataDir(), natsbus.SystemDataDir)
	if tok, file := natsbus.LocalToken(n.URL, dirs...); tok != "" {
		o.Token = tok
		o.AuthHint = "the token in " + file + " was refused: that file belongs to another reactord daemon (another --data-dir?); pass --nats-token-file DATA_DIR/" + natsbus.TokenFileName + " of the daemon serving this address"
		return o, nil
	}
	o.AuthHint = tokenHint(dirs)
	return o, nil
}

// tokenHint says where a client finds the embedded server's token.
func tokenHint(dirs []string) string {
	var files, unreadable []string
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		f := natsbus.TokenFile(d)
		files = append(files, f)
		if _, err := os.ReadFile(f); errors.Is(err, fs.ErrPermission) {
			unreadable = append(unreadable, f)
		}
	}
	hint := "the server requires authentication: for reactord's embedded server, run as a user who can read DATA_DIR/" +
		natsbus.TokenFileName + " (DATA_DIR is the daemon's --data-dir; looked in " + strings.Join(files, ", ") +
		"), or pass --nats-token-file DATA_DIR/" + natsbus.TokenFileName + "; for another server, give its credentials (--nats-token-file, --nats-user and --nats-password-file, --nats-creds)"
	if len(unreadable) > 0 {
		hint += "; this user may not read " + strings.Join(unreadable, ", ")
	}
	return hint
}

// startEmbedded starts the daemon's embedded NATS server with the token
// of dataDir (created at the first start), or open to every client with
// open, and records its address beside the token. It returns the server
// and the token the daemon connects with.
func startEmbedded(log *slog.Logger, so embedded.Options, dataDir string, open bool) (*embedded.Server, string, error) {
	token, tokenFile := "", natsbus.TokenFile(dataDir)
	if !open {
		tok, created, exposed, err := natsbus.EnsureToken(dataDir)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return nil, "", fmt.Errorf("%w: this user cannot keep the embedded server's token in --data-dir %s; run reactord as the user that owns it (the packages' reactord user), or give --data-dir a directory this user can write", err, dataDir)
			}
			return nil, "", fmt.Errorf("the embedded server's token in --data-dir %s: %w", dataDir, err)
		}
		if created {
			log.Info("created the embedded NATS server's token", "token_file", tokenFile,
				"detail", "clients run by a user who can read it use it by themselves")
		}
		if exposed {
			log.Warn("NATS token file readable by every local user", "token_file", tokenFile,
				"detail", "any local user can then read and publish events", "fix", "chmod 600 it")
		}
		token = tok
	}
	so.Token = token
	srv, err := embedded.Start(so)
	if err != nil {
		return nil, "", err
	}
	if err := natsbus.RecordAddr(dataDir, srv.Addr()); err != nil {
		srv.Shutdown()
		return nil, "", err
	}
	if open {
		log.Warn("embedded NATS server accepts clients without authentication", "listen", srv.Addr(),
			"flag", "--listen-open",
			"detail", "anyone who can reach it can read every event and reaction, publish events that make reactord accept keys or run states, or delete the stream")
	} else {
		log.Info("the embedded NATS server requires its token", "token_file", tokenFile)
	}
	return srv, token, nil
}
