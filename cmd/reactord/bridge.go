package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/reactord/reactord/bridge"
	"github.com/reactord/reactord/natsbus"
)

func cmdBridge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bridge", "reactord bridge --salt-api URL --nats URL [--saltapi-user U --saltapi-password P --saltapi-eauth E | --saltapi-token T]",
		`Reads salt-api's /events stream (server-sent events) and publishes every
event to NATS (to JetStream when a stream captures salt.evt.>) with a
Nats-Msg-Id derived from the event, so bridges on two masters do not
double-publish. Reconnects with backoff; counts and logs what it could not
publish. Runs until interrupted.`, stderr)
	var nf natsFlags
	nf.register(fs)
	url := fs.String("salt-api", "", "salt-api base URL (required)")
	user := fs.String("saltapi-user", "", "eauth user")
	pw := fs.String("saltapi-password", "", "eauth password (or $REACTORD_SALTAPI_PASSWORD)")
	eauth := fs.String("saltapi-eauth", "auto", "eauth backend")
	token := fs.String("saltapi-token", "", "session token from /login")
	ca := fs.String("saltapi-ca", "", "CA file for salt-api's certificate")
	if ok, code := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *url == "" || nf.url == "" {
		fmt.Fprintln(stderr, "bridge: need --salt-api URL and --nats URL")
		return exitUsage
	}
	if *pw == "" {
		*pw = os.Getenv("REACTORD_SALTAPI_PASSWORD")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts := nf.options("reactord-bridge")
	opts.NoReconnectBuffer = true
	conn, err := natsbus.Connect(opts)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	defer conn.Close()
	b, err := bridge.New(bridge.Config{URL: *url, Token: *token, Username: *user, Password: *pw, EAuth: *eauth, CAFile: *ca, Logger: log}, conn)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	err = b.Run(ctx)
	st := b.Stats()
	sum, _ := json.Marshal(map[string]int64{"received": st.Received.Load(), "published": st.Published.Load(), "failed": st.Dropped.Load(), "malformed": st.Malformed.Load(), "reconnects": st.Reconnects.Load()})
	fmt.Fprintf(stderr, "%s\n", sum)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: %v\n", err)
		return exitUsage
	}
	return exitOK
}
