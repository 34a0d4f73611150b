package natsbus

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The embedded server's credentials live in the daemon's data directory:
//
//	nats.token  the token clients must present (mode 0600, created once with
//	            a random value, reused across restarts); it holds the token
//	            alone, so it can be given to --nats-token-file as it is
//	nats.addr   the address the server listened on at its last start, so a
//	            client sends the token found beside it to that server only
//
// A user who can read nats.token can use the server; nobody else can.
const (
	// TokenFileName is the name of the token file in a data directory.
	TokenFileName = "nats.token"
	// AddrFileName is the name of the file recording the server's address.
	AddrFileName = "nats.addr"
)

// DefaultDataDir is the daemon's data directory when none is configured:
// the user cache directory's reactord folder; without one (no HOME), a
// folder of this user's own in the temporary directory, reactord-UID,
// which EnsurePrivateDir refuses when another user made it first.
func DefaultDataDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), fmt.Sprintf("reactord-%d", os.Getuid()))
	}
	return filepath.Join(base, "reactord")
}

// SystemDataDir is the data directory of the packaged systemd unit
// (StateDirectory=reactord). Clients look for a token there too, so root
// (or anyone the operator lets read the file) can use the service's server
// without flags.
const SystemDataDir = "/var/lib/reactord"

// TokenFile is the path of the token file in the data directory dir.
func TokenFile(dir string) string { return filepath.Join(dir, TokenFileName) }

// EnsureToken returns the token in dir's token file, creating the file
// (mode 0600) with a new random token when there is none; created says
// which. The file is written under another name and linked into place, so
// no reader sees it half-written, and two daemons starting at once agree
// on one token. A token file readable by others is used, and said so by
// worldReadable.
func EnsureToken(dir string) (token string, created, worldReadable bool, err error) {
	path := TokenFile(dir)
	if tok, wr, err := readToken(path, true); err == nil {
		return tok, false, wr, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, false, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", false, false, fmt.Errorf("NATS token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	tmp, err := os.CreateTemp(dir, ".nats.token-*")
	if err != nil {
		return "", false, false, fmt.Errorf("NATS token: %w", err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600 already; make sure of it.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", false, false, fmt.Errorf("NATS token: %w", err)
	}
	if _, err := tmp.WriteString(tok + "\n"); err != nil {
		tmp.Close()
		return "", false, false, fmt.Errorf("NATS token: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", false, false, fmt.Errorf("NATS token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", false, false, fmt.Errorf("NATS token: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another daemon won the race: use its token.
			tok, wr, err := readToken(path, true)
			return tok, false, wr, err
		}
		return "", false, false, fmt.Errorf("NATS token: %w", err)
	}
	return tok, true, false, nil
}

// readToken reads a token file, refusing one another local user could
// have planted or changed, or in such a directory (CheckPrivate); without
// owner, one belonging to any user passes (a client reading the packaged
// service's token, which belongs to the service's user), unless its group
// or others can write it.
func readToken(path string, owner bool) (token string, worldReadable bool, err error) {
	for _, p := range []string{filepath.Dir(path), path} {
		if err := checkFile(p, owner); err != nil {
			return "", false, fmt.Errorf("NATS token: %w", err)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", false, fmt.Errorf("NATS token: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false, fmt.Errorf("NATS token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", false, fmt.Errorf("NATS token: %s is empty (remove it to have a new token made)", path)
	}
	return tok, st.Mode().Perm()&0o004 != 0, nil
}

// RecordAddr writes addr (host:port), the address the embedded server
// listens on, beside the token in dir, for LocalToken.
func RecordAddr(dir, addr string) error {
	path := filepath.Join(dir, AddrFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o600); err != nil {
		return fmt.Errorf("NATS address file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("NATS address file: %w", err)
	}
	return nil
}

// ForgetAddr removes the address file of dir when it still records addr:
// the server stopped, so a client (fire, the bridge) must not take it for
// a daemon's. A newer daemon's address, recorded meanwhile, is kept.
func ForgetAddr(dir, addr string) error {
	path := filepath.Join(dir, AddrFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("NATS address file: %w", err)
	}
	if strings.TrimSpace(string(b)) != addr {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("NATS address file: %w", err)
	}
	return nil
}

// LocalToken looks in each data directory in turn for the token of the
// embedded server that natsURL (a URL or a comma-separated list) points
// to, and returns it with the file it came from; it returns "" when no
// directory holds a token this user may read for that server. A token is
// only returned for a server at the address recorded beside it, so it is
// never sent to another server. A URL carrying user information brings
// its own credentials and gets none.
func LocalToken(natsURL string, dirs ...string) (token, file string) {
	seen := map[string]bool{}
	for _, dir := range dirs {
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		// The packaged service's files belong to its user: a client
		// takes them when nobody else could have written them.
		owner := filepath.Clean(dir) != SystemDataDir
		if checkFile(filepath.Join(dir, AddrFileName), owner) != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, AddrFileName))
		if err != nil || !urlsAt(natsURL, strings.TrimSpace(string(b))) {
			continue
		}
		tok, _, err := readToken(TokenFile(dir), owner)
		if err != nil {
			continue
		}
		return tok, TokenFile(dir)
	}
	return "", ""
}

// LocalAddr returns the address the embedded server of a local daemon
// recorded (RecordAddr) in the first of dirs holding one this user may
// trust (as LocalToken checks it), and that directory; "" when none does.
func LocalAddr(dirs ...string) (addr, dir string) {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		owner := filepath.Clean(d) != SystemDataDir
		path := filepath.Join(d, AddrFileName)
		if checkFile(path, owner) != nil {
			continue
		}
		b, err := os.ReadFile(path)
		if a := strings.TrimSpace(string(b)); err == nil && a != "" {
			return a, d
		}
	}
	return "", ""
}

// urlsAt reports whether every URL of the list points to addr, a server's
// listen address.
func urlsAt(list, addr string) bool {
	ahost, aport, err := net.SplitHostPort(addr)
	if err != nil || strings.TrimSpace(list) == "" {
		return false
	}
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil || u.User != nil {
			return false
		}
		port := u.Port()
		if port == "" {
			port = "4222"
		}
		if port != aport || !sameHost(u.Hostname(), ahost) {
			return false
		}
	}
	return true
}

// sameHost reports whether a client dialling host reaches a server that
// listens on listenHost, on this machine.
func sameHost(host, listenHost string) bool {
	if strings.EqualFold(host, listenHost) {
		return true
	}
	if isLoopback(host) && isLoopback(listenHost) {
		return true
	}
	lip := net.ParseIP(listenHost)
	if lip == nil || !lip.IsUnspecified() {
		return false
	}
	// The server listens on every interface: any of this machine's
	// addresses reaches it.
	if isLoopback(host) {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
