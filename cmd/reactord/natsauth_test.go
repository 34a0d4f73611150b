package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/reactord/reactord/internal/testfiles"
	"github.com/reactord/reactord/natsbus"
)

// runBin runs the reactord binary with extra environment variables and
// returns its exit code and output.
func runBin(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("running reactord %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// readReaction waits for the daemon's next dry-run line and returns its tag.
func readReaction(t *testing.T, p *proc) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := p.stdout.ReadString('\n')
		ch <- l
	}()
	select {
	case l := <-ch:
		var v struct {
			Tag string `json:"tag"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("reaction line %q: %v", l, err)
		}
		return v.Tag
	case <-time.After(10 * time.Second):
		t.Fatal("no reaction within 10s")
	}
	return ""
}

func stopDaemon(t *testing.T, p *proc) {
	t.Helper()
	p.terminate()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

// TestEmbeddedNATSRequiresToken: the daemon's embedded server refuses a
// client without the token in DATA_DIR/nats.token (0600, created at the
// first start, the same after a restart), with an error saying what to do;
// fire with the token file, with $REACTORD_NATS_TOKEN, or run by a user
// whose default data directory holds the token, gets its event through.
func TestEmbeddedNATSRequiresToken(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // no token in the default data directory
	conf := copyExampleConfig(t)
	data := filepath.Join(t.TempDir(), "reactord")
	listen := freeAddr(t)
	url := "nats://" + listen
	p := startDaemon(t, "-c", conf, "--dry-run", "--listen", listen, "--data-dir", data)

	tokenFile := filepath.Join(data, "nats.token")
	st, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %#o, want 0600", st.Mode().Perm())
	}
	token, _ := os.ReadFile(tokenFile)

	// Any local client without the token is refused.
	if _, err := natsbus.Connect(natsbus.ConnOptions{URL: url}); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("anonymous client: %v", err)
	}
	code, _, errOut := runBin(t, nil, "fire", "--nats", url, "salt/auth", `{"id": "evil", "act": "pend"}`)
	if code != exitUsage || !strings.Contains(errOut, "Authorization Violation") ||
		!strings.Contains(errOut, "run as a user who can read DATA_DIR/nats.token") || !strings.Contains(errOut, "--nats-token-file") {
		t.Fatalf("fire without the token: exit %d, %s", code, errOut)
	}
	code, _, errOut = runBin(t, nil, "events", "--nats", url, "--count", "1")
	if code != exitUsage || !strings.Contains(errOut, "Authorization Violation") {
		t.Fatalf("events without the token: exit %d, %s", code, errOut)
	}

	fire := func(env []string, id string, args ...string) {
		t.Helper()
		args = append(append([]string{"fire", "--nats", url}, args...), "salt/minion/"+id+"/start", `{"id": "`+id+`"}`)
		if code, _, errOut := runBin(t, env, args...); code != exitOK {
			t.Fatalf("fire %v: exit %d, %s", args, code, errOut)
		}
		if tag := readReaction(t, p); tag != "salt/minion/"+id+"/start" {
			t.Fatalf("reaction to %s", tag)
		}
	}
	fire(nil, "web1", "--nats-token-file", tokenFile)
	fire([]string{"REACTORD_NATS_TOKEN=" + strings.TrimSpace(string(token))}, "web2")
	// A user whose default data directory is the daemon's finds the token.
	fire([]string{"XDG_CACHE_HOME=" + filepath.Dir(data)}, "web3")

	// A restart keeps the token.
	stopDaemon(t, p)
	p = startDaemon(t, "-c", conf, "--dry-run", "--listen", listen, "--data-dir", data)
	again, _ := os.ReadFile(tokenFile)
	if !bytes.Equal(again, token) {
		t.Fatal("the token changed across a restart")
	}
	fire([]string{"REACTORD_NATS_TOKEN=" + strings.TrimSpace(string(token))}, "web4")
}

// TestREADMEMainCommandWithToken: the README's main command, on the
// daemon's default data directory: fire with only --nats finds the token.
func TestREADMEMainCommandWithToken(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	listen := freeAddr(t)
	// --data-dir "" is the default (and keeps startDaemon from adding one).
	p := startDaemon(t, "-c", copyExampleConfig(t), "--dry-run", "--listen", listen, "--data-dir", "")
	if _, err := os.Stat(filepath.Join(cache, "reactord", "nats.token")); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runBin(t, nil, "fire", "--nats", "nats://"+listen, "salt/minion/web1/start", `{"id": "web1"}`)
	if code != exitOK {
		t.Fatalf("fire: exit %d, %s", code, errOut)
	}
	if tag := readReaction(t, p); tag != "salt/minion/web1/start" {
		t.Fatalf("reaction to %s", tag)
	}
	// Stopped, the demo's daemon forgets its address: fire without --nats
	// says there is no daemon, instead of trying a dead address.
	waitExit(t, p)
	if _, err := os.Stat(filepath.Join(cache, "reactord", natsbus.AddrFileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the stopped daemon left its address behind: %v", err)
	}
	code, _, errOut = runBin(t, []string{"NATS_URL="}, "fire", "salt/minion/web1/start", `{"id": "web1"}`)
	if code != exitUsage || !strings.Contains(errOut, "need --nats URL") {
		t.Fatalf("fire after the daemon stopped: exit %d, %s", code, errOut)
	}
}

// TestListenOpen: --listen-open runs the embedded server without
// authentication, with a warning.
func TestListenOpen(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	listen := freeAddr(t)
	p := startDaemon(t, "-c", copyExampleConfig(t), "--dry-run", "--listen", listen, "--listen-open")
	if !strings.Contains(p.logs(), "level=WARN") || !strings.Contains(p.logs(), "accepts clients without authentication") || !strings.Contains(p.logs(), "flag=--listen-open") {
		t.Fatalf("no warning:\n%s", p.logs())
	}
	c, err := natsbus.Connect(natsbus.ConnOptions{URL: "nats://" + listen})
	if err != nil {
		t.Fatalf("anonymous client refused: %v", err)
	}
	c.Close()
	if code, _, errOut := runBin(t, []string{"XDG_CACHE_HOME=" + t.TempDir()}, "fire", "--nats", "nats://"+listen, "salt/minion/web1/start", `{"id": "web1"}`); code != exitOK {
		t.Fatalf("fire: exit %d, %s", code, errOut)
	}
	if tag := readReaction(t, p); tag != "salt/minion/web1/start" {
		t.Fatalf("reaction to %s", tag)
	}
}

// TestSecretFilesAndEnvProcesses: the NATS password and the salt-api
// password and token reach their servers from *-file flags and
// environment variables; a file others can read is used with a warning;
// the store URL comes from --store-file or $REACTORD_STORE.
func TestSecretFilesAndEnvProcesses(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	o := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, Username: "reactord", Password: "nats-pw"}
	ns, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(ns.Shutdown)
	url := ns.ClientURL()
	fire := []string{"fire", "--nats", url, "--nats-user", "reactord"}
	ev := []string{"a/b", "{}"}
	t.Run("nats password", func(t *testing.T) {
		for _, c := range []struct {
			name string
			env  []string
			args []string
			ok   bool
			warn bool
		}{
			{"file", nil, []string{"--nats-password-file", testfiles.Secret(t, "nats-pw\n", 0o600)}, true, false},
			{"file readable by others", nil, []string{"--nats-password-file", testfiles.Secret(t, "nats-pw\n", 0o644)}, true, true},
			{"env", []string{"REACTORD_NATS_PASSWORD=nats-pw"}, nil, true, false},
			{"flag wins over env", []string{"REACTORD_NATS_PASSWORD=wrong"}, []string{"--nats-password", "nats-pw"}, true, false},
			{"wrong file", nil, []string{"--nats-password-file", testfiles.Secret(t, "wrong\n", 0o600)}, false, false},
		} {
			args := append(append(append([]string{}, fire...), c.args...), ev...)
			code, _, errOut := runBin(t, c.env, args...)
			if (code == exitOK) != c.ok {
				t.Errorf("%s: exit %d, %s", c.name, code, errOut)
			}
			if !c.ok && !strings.Contains(errOut, "refused the credentials given") {
				t.Errorf("%s: %s", c.name, errOut)
			}
			if got := strings.Contains(errOut, "secret file is readable by other users"); got != c.warn {
				t.Errorf("%s: warning %v, want %v: %s", c.name, got, c.warn, errOut)
			}
		}
	})

	t.Run("salt-api password and token", func(t *testing.T) {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/login":
				var v map[string]string
				_ = json.NewDecoder(r.Body).Decode(&v)
				if v["password"] != "api-pw" {
					http.Error(w, "no", http.StatusUnauthorized)
					return
				}
				fmt.Fprint(w, `{"return": [{"token": "api-tok"}]}`)
			case "/events":
				if r.Header.Get("X-Auth-Token") != "api-tok" {
					http.Error(w, "no", http.StatusUnauthorized)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "retry: 400\n")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			default:
				http.NotFound(w, r)
			}
		}))
		t.Cleanup(api.Close)
		t.Setenv("REACTORD_NATS_PASSWORD", "nats-pw")
		base := []string{"bridge", "--salt-api", api.URL, "--nats", url, "--nats-user", "reactord"}
		// startDaemon waits for /healthz 200: the bridge reads the stream.
		startDaemon(t, append(base, "--saltapi-user", "salt", "--saltapi-password-file", testfiles.Secret(t, "api-pw\n", 0o600))...)
		t.Setenv("REACTORD_SALTAPI_TOKEN", "api-tok")
		startDaemon(t, base...)
	})

	t.Run("store", func(t *testing.T) {
		// Each store holds the recorded jobs: listing them proves the
		// command opened the store the secret names.
		const jid = "20261123102304655343"
		db := "sqlite://" + filepath.Join(t.TempDir(), "from-file.db")
		archive(t, db, readRecordedEvents(t))
		if code, out, errOut := runCmd(t, "", "jobs", "list", "--store-file", testfiles.Secret(t, db+"\n", 0o600)); code != exitOK || !strings.Contains(out, jid+":") {
			t.Fatalf("jobs list --store-file: exit %d, %s%s", code, out, errOut)
		}
		envDB := "sqlite://" + filepath.Join(t.TempDir(), "from-env.db")
		archive(t, envDB, readRecordedEvents(t))
		t.Setenv("REACTORD_STORE", envDB)
		if code, out, errOut := runCmd(t, "", "jobs", "list"); code != exitOK || !strings.Contains(out, jid+":") {
			t.Fatalf("jobs list with $REACTORD_STORE: exit %d, %s%s", code, out, errOut)
		}
	})
}

// TestSaltAPIURLRedacted: a salt-api URL whose password makes it invalid
// is reported without the password, by the daemon and by the bridge.
func TestSaltAPIURLRedacted(t *testing.T) {
	t.Parallel()
	srv, _ := natsServer(t)
	bad := "http://salt:S3cretPw@127.0.0.1:notaport"
	code, _, errOut := runCmd(t, "", "-c", copyExampleConfig(t), "--nats", srv.ClientURL(), "--driver", "saltapi", "--saltapi-url", bad, "--store", "none", "--data-dir", t.TempDir())
	if code != exitUsage || strings.Contains(errOut, "S3cretPw") || !strings.Contains(errOut, "salt:xxxxx@") {
		t.Fatalf("daemon: exit %d, %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "", "bridge", "--salt-api", bad, "--saltapi-token", "t", "--nats", srv.ClientURL(), "--data-dir", t.TempDir())
	if code != exitUsage || strings.Contains(errOut, "S3cretPw") || !strings.Contains(errOut, "salt:xxxxx@") {
		t.Fatalf("bridge: exit %d, %s", code, errOut)
	}
}

// TestClientsFindTheLocalDaemon: fire and events need no --nats beside a
// daemon on its embedded server: they take $NATS_URL, else the address the
// daemon recorded in its (default) data directory, with its token; flags
// may follow the tag and data. Without either they say what they need.
func TestClientsFindTheLocalDaemon(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	data := filepath.Join(cache, "reactord")
	conf := copyExampleConfig(t)
	listen := freeAddr(t)
	p := startDaemon(t, "-c", conf, "--dry-run", "--listen", listen, "--data-dir", data)
	env := []string{"XDG_CACHE_HOME=" + cache, "NATS_URL="}
	fire := func(env []string, id string, args ...string) {
		t.Helper()
		args = append([]string{"fire", "salt/minion/" + id + "/start", `{"id": "` + id + `"}`}, args...)
		if code, _, errOut := runBin(t, env, args...); code != exitOK {
			t.Fatalf("fire %v: exit %d, %s", args, code, errOut)
		}
		if tag := readReaction(t, p); tag != "salt/minion/"+id+"/start" {
			t.Fatalf("reaction to %s", tag)
		}
	}
	fire(env, "web1") // the address in the default data directory
	// $NATS_URL, with the token found for its address.
	fire([]string{"XDG_CACHE_HOME=" + cache, "NATS_URL=nats://" + listen}, "web2")
	// Flags after the tag and the data.
	fire([]string{"NATS_URL="}, "web3", "--nats", "nats://"+listen, "--nats-token-file", filepath.Join(data, "nats.token"))
	// events finds it too.
	cmd := exec.Command(binPath, "events", "--count", "1", "salt/minion/*/start")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _ = io.Copy(io.Discard, out); done <- cmd.Wait() }()
	deadline := time.After(20 * time.Second)
	for stop := false; !stop; {
		fire(env, "web4")
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("events: %v: %s", err, errb.String())
			}
			stop = true
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("events without --nats saw nothing: %s", errb.String())
		case <-time.After(300 * time.Millisecond):
		}
	}
	// Nowhere to go: a clear error, not a connection to a default address.
	code, _, errOut := runBin(t, []string{"XDG_CACHE_HOME=" + t.TempDir(), "NATS_URL="}, "fire", "x/y", "{}")
	if code != exitUsage || !strings.Contains(errOut, "need --nats URL: no $NATS_URL") {
		t.Fatalf("fire with no server known: exit %d, %s", code, errOut)
	}
}

// TestBridgeFindsTheLocalDaemon: the bridge, like fire, needs no --nats
// beside a daemon whose embedded server listens elsewhere than its default
// address: it takes the address the daemon recorded in its (default) data
// directory, with its token, and says where it found it.
func TestBridgeFindsTheLocalDaemon(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("NATS_URL", "")
	listen := freeAddr(t)
	p := startDaemon(t, "-c", copyExampleConfig(t), "--dry-run", "--listen", listen, "--data-dir", filepath.Join(cache, "reactord"))
	frames := make(chan []byte, 1)
	br := startDaemon(t, "bridge", "--sock-dir", fakeMasterSocket(t, frames), "--data-dir", t.TempDir())
	frames <- saltFrame(t, "salt/minion/web1/start", map[string]any{"id": "web1", "_stamp": "2026-11-26T23:40:00.000000"})
	if tag := readReaction(t, p); tag != "salt/minion/web1/start" {
		t.Fatalf("reaction to %s", tag)
	}
	if want := `msg="publishing to NATS" url=nats://` + listen + " from=" + filepath.Join(cache, "reactord", "nats.addr"); !strings.Contains(br.logs(), want) {
		t.Fatalf("the bridge's log lacks %s:\n%s", want, br.logs())
	}
}

// TestBridgeWithoutADaemonSaysSo: a bridge started before any daemon
// recorded its address publishes to the embedded server's default address
// and says so as a warning, naming the fix (a daemon started later on
// another --listen is not found: the timed first-contact run started both
// at once and its bridge published to a foreign server on 4222).
func TestBridgeWithoutADaemonSaysSo(t *testing.T) {
	if _, err := os.Stat(filepath.Join(natsbus.SystemDataDir, natsbus.AddrFileName)); err == nil {
		t.Skipf("%s records a daemon's address on this machine", natsbus.SystemDataDir)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("NATS_URL", "")
	br := launchDaemon(t, "bridge", "--sock-dir", fakeMasterSocket(t, make(chan []byte)), "--data-dir", t.TempDir())
	checkFor(t, 20*time.Second, func() error {
		logs := br.logs()
		for _, want := range []string{
			`level=WARN msg="no daemon has recorded its NATS address: using the default"`,
			`msg="publishing to NATS" url=nats://127.0.0.1:4222 from="the embedded server's default address"`,
		} {
			if !strings.Contains(logs, want) {
				return fmt.Errorf("the bridge's log lacks %s:\n%s", want, logs)
			}
		}
		return nil
	})
}
