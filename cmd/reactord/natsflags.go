package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/reactord/reactord/natsbus"
)

// natsFlags are the connection flags shared by the daemon, fire, events and
// bridge.
type natsFlags struct {
	url, token, tokenFile, user, password, passwordFile, nkey, creds, ca, cert, key string
}

// Environment variables holding NATS secrets, read when neither the flag
// nor its *-file flag is given.
const (
	envNATSToken    = "REACTORD_NATS_TOKEN"
	envNATSPassword = "REACTORD_NATS_PASSWORD"
)

// natsClientUsage is the --nats help of the commands that connect to a
// server and never start one.
const natsClientUsage = "NATS URL(s) to connect to (required; the daemon's embedded server listens on nats://127.0.0.1:4222 by default)"

// register adds the connection flags; urlUsage is the help of --nats, which
// says what an empty URL does for this command.
func (n *natsFlags) register(fs *flag.FlagSet, urlUsage string) {
	fs.StringVar(&n.url, "nats", "", urlUsage)
	fs.StringVar(&n.token, "nats-token", "", "NATS token (shows in ps: prefer --nats-token-file or $"+envNATSToken+"); default: the token of reactord's embedded server at that address, when this user can read it")
	fs.StringVar(&n.tokenFile, "nats-token-file", "", "file holding the NATS token (reactord's embedded server: DATA_DIR/"+natsbus.TokenFileName+")")
	fs.StringVar(&n.user, "nats-user", "", "NATS user")
	fs.StringVar(&n.password, "nats-password", "", "NATS password (shows in ps: prefer --nats-password-file or $"+envNATSPassword+")")
	fs.StringVar(&n.passwordFile, "nats-password-file", "", "file holding the NATS password")
	fs.StringVar(&n.nkey, "nats-nkey", "", "NATS NKey seed file")
	fs.StringVar(&n.creds, "nats-creds", "", "NATS .creds file")
	fs.StringVar(&n.ca, "nats-ca", "", "CA file for NATS TLS")
	fs.StringVar(&n.cert, "nats-cert", "", "client certificate for NATS TLS")
	fs.StringVar(&n.key, "nats-key", "", "client key for NATS TLS")
}

// options returns the connection options, with the secrets read from
// their flags, files or environment variables. When none is given, the
// token of reactord's embedded server at the URL's address is used, found
// in dataDirs, then the default data directory, then the systemd unit's, if
// this user can read it; AuthHint says what to do when the server refuses.
func (n *natsFlags) options(name string, dataDirs ...string) (natsbus.ConnOptions, error) {
	token, err := secretValue(n.token, envNATSToken, n.tokenFile)
	if err != nil {
		return natsbus.ConnOptions{}, fmt.Errorf("--nats-token-file: %w", err)
	}
	password, err := secretValue(n.password, envNATSPassword, n.passwordFile)
	if err != nil {
		return natsbus.ConnOptions{}, fmt.Errorf("--nats-password-file: %w", err)
	}
	o := natsbus.ConnOptions{URL: n.url, Name: name, Token: token, User: n.user, Password: password,
		NKeyFile: n.nkey, CredsFile: n.creds, CAFile: n.ca, CertFile: n.cert, KeyFile: n.key}
	if token != "" || n.user != "" || n.nkey != "" || n.creds != "" {
		o.AuthHint = "the server refused the credentials given (--nats-token, --nats-user, --nats-nkey, --nats-creds, their *-file flags or $" + envNATSToken + ")"
		return o, nil
	}
	dirs := append(append([]string{}, dataDirs...), natsbus.DefaultDataDir(), natsbus.SystemDataDir)
	if tok, file := natsbus.LocalToken(n.url, dirs...); tok != "" {
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
func startEmbedded(log *slog.Logger, so natsbus.ServerOptions, dataDir string, open bool) (*natsbus.Embedded, string, error) {
	token, tokenFile := "", natsbus.TokenFile(dataDir)
	if !open {
		tok, created, exposed, err := natsbus.EnsureToken(dataDir)
		if err != nil {
			return nil, "", fmt.Errorf("%w (--listen-open runs the server without authentication)", err)
		}
		if created {
			log.Info("created the embedded NATS server's token; clients run by a user who can read it use it by themselves", "token_file", tokenFile)
		}
		if exposed {
			log.Warn("the NATS token file is readable by every local user, who can then read and publish events; chmod 600 it", "token_file", tokenFile)
		}
		token = tok
	}
	so.Token = token
	srv, err := natsbus.StartEmbedded(so)
	if err != nil {
		return nil, "", err
	}
	if err := natsbus.RecordAddr(dataDir, srv.Addr()); err != nil {
		srv.Shutdown()
		return nil, "", err
	}
	if open {
		log.Warn("the embedded NATS server accepts clients without authentication (--listen-open): anyone who can reach it can read every event and reaction, publish events that make reactord accept keys or run states, or delete the stream",
			"listen", srv.Addr())
	} else {
		log.Info("the embedded NATS server requires its token", "token_file", tokenFile)
	}
	return srv, token, nil
}
