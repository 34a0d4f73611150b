package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// errNoDBServer reports that --store-server's binaries are not installed.
var errNoDBServer = errors.New("database server not installed")

// dbServer is the private audit database server of --store-server: a
// MariaDB or PostgreSQL of the soak's own, in a temporary directory on a
// free port, which the db-restart fault kills and starts again. The
// machine's own database servers are never touched.
type dbServer struct {
	kind string // "mariadb" or "postgres"
	dir  string
	bin  string
	args []string
	// uid and gid, when set, are the user the server runs as
	// (PostgreSQL refuses to run as root).
	uid, gid *uint32
	port     int
	url      string // the store URL for the replicas
	mu       sync.Mutex
	c        *child
}

// dbServerBins returns the server's and its initialisation's binaries,
// or errNoDBServer naming what is missing.
func dbServerBins(kind string) (server, initdb string, err error) {
	switch kind {
	case "mariadb":
		server, initdb = "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db"
		if p, err := exec.LookPath("mariadbd"); err == nil {
			server = p
		}
		if p, err := exec.LookPath("mariadb-install-db"); err == nil {
			initdb = p
		}
	case "postgres":
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int { return pgMajor(b) - pgMajor(a) }) // the newest first
		if len(dirs) == 0 {
			return "", "", fmt.Errorf("%w: no /usr/lib/postgresql/*/bin (install postgresql)", errNoDBServer)
		}
		server, initdb = filepath.Join(dirs[0], "postgres"), filepath.Join(dirs[0], "initdb")
	default:
		return "", "", fmt.Errorf("--store-server %q: want mariadb or postgres", kind)
	}
	for _, b := range []string{server, initdb} {
		if _, err := os.Stat(b); err != nil {
			return "", "", fmt.Errorf("%w: %s not found (install %s)", errNoDBServer, b, map[string]string{"mariadb": "mariadb-server", "postgres": "postgresql"}[kind])
		}
	}
	return server, initdb, nil
}

// pgMajor is the major version in a /usr/lib/postgresql/N/bin path.
func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// startDBServer initialises a server of kind in a temporary directory
// and starts it.
func startDBServer(ctx context.Context, kind string) (*dbServer, error) {
	server, initdb, err := dbServerBins(kind)
	if err != nil {
		return nil, err
	}
	d := &dbServer{kind: kind, bin: server}
	if d.dir, err = os.MkdirTemp("", "reactord-soak-db-"); err != nil {
		return nil, err
	}
	if d.port, err = freePort(); err != nil {
		return nil, err
	}
	data := filepath.Join(d.dir, "data")
	var init *exec.Cmd
	switch kind {
	case "mariadb":
		// Small logs and buffers: a soak's audit tables, on a shared machine.
		small := []string{"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M"}
		init = exec.Command(initdb, append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal",
			"--skip-test-db", "--skip-name-resolve"}, small...)...)
		sqlFile := filepath.Join(d.dir, "init.sql")
		if err := os.WriteFile(sqlFile, []byte("CREATE DATABASE IF NOT EXISTS soak;\n"), 0o644); err != nil {
			return nil, err
		}
		d.args = append([]string{"--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(d.port), "--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(d.dir, "mariadb.sock"), "--skip-grant-tables", "--skip-log-bin", "--init-file=" + sqlFile}, small...)
		if os.Geteuid() == 0 {
			init.Args = append(init.Args, "--user=root")
			d.args = append(d.args, "--user=root")
		}
		d.url = fmt.Sprintf("mysql://root@127.0.0.1:%d/soak", d.port)
	case "postgres":
		if os.Geteuid() == 0 { // PostgreSQL refuses root: its own user
			u, err := user.Lookup("postgres")
			if err != nil {
				return nil, fmt.Errorf("%w: running PostgreSQL as root needs the postgres user: %v", errNoDBServer, err)
			}
			uid, _ := strconv.ParseUint(u.Uid, 10, 32)
			gid, _ := strconv.ParseUint(u.Gid, 10, 32)
			d.uid, d.gid = ptr(uint32(uid)), ptr(uint32(gid))
			if err := os.Chown(d.dir, int(uid), int(gid)); err != nil {
				return nil, err
			}
		}
		init = exec.Command(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-N")
		// fsync off: a killed server recovers from its WAL all the same
		// (the machine does not crash), and the shared disk is spared.
		d.args = []string{"-D", data, "-p", strconv.Itoa(d.port), "-k", d.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"}
		d.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", d.port)
	}
	if d.uid != nil {
		runAs(init, *d.uid, *d.gid)
	}
	if out, err := init.CombinedOutput(); err != nil {
		d.remove()
		return nil, fmt.Errorf("%s: %w\n%s", strings.Join(init.Args, " "), err, tail(string(out), 10))
	}
	if err := d.start(ctx); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

func ptr[T any](v T) *T { return &v }

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// start runs the server and waits until it logs that it is ready and
// accepts connections.
func (d *dbServer) start(ctx context.Context) error {
	c := &child{name: d.kind, cmd: exec.Command(d.bin, d.args...)}
	ownGroup(c.cmd)
	if d.uid != nil {
		runAs(c.cmd, *d.uid, *d.gid)
	}
	if err := c.start(); err != nil {
		return err
	}
	d.mu.Lock()
	d.c = c
	d.mu.Unlock()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port))
	ready := map[string]string{"mariadb": "ready for connections", "postgres": "ready to accept connections"}[d.kind]
	return waitFor(ctx, 2*time.Minute, []*child{c}, func() error {
		if !strings.Contains(c.logs(), ready) {
			return fmt.Errorf("no %q logged yet", ready)
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// kill SIGKILLs the server with every process it forked, and waits for
// it to end.
func (d *dbServer) kill() error {
	d.mu.Lock()
	c := d.c
	d.mu.Unlock()
	if c == nil || c.done == nil {
		return errors.New("not running")
	}
	if err := killGroup(c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return err
	}
	<-c.done
	return nil
}

// restart is the db-restart fault: the server killed, down for down,
// started again (it recovers from its log).
func (d *dbServer) restart(down time.Duration) error {
	if err := d.kill(); err != nil {
		return err
	}
	time.Sleep(down)
	return d.start(context.Background())
}

// stop ends the server (SIGTERM, then SIGKILL after 20 s) and removes
// its directory.
func (d *dbServer) stop() {
	d.mu.Lock()
	c := d.c
	d.mu.Unlock()
	if c != nil && c.done != nil {
		_ = killGroup(c.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			_ = killGroup(c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	}
	d.remove()
}

func (d *dbServer) remove() { _ = os.RemoveAll(d.dir) }
