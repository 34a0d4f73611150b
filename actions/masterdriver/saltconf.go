package masterdriver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MasterConfig is what the driver reads of a Salt master's configuration:
// what the salt command reads to publish a job.
type MasterConfig struct {
	// Interface and RetPort are the master's request server (interface,
	// ret_port: 0.0.0.0 and 4506 by default).
	Interface string
	RetPort   int
	// CacheDir holds the key files (.root_key, .<user>_key), with root_dir
	// applied as Salt applies it.
	CacheDir string
	// User is the user the master runs as (user: root by default).
	User string
	// Nodegroups maps a nodegroup to its compound expression (a list of
	// words is joined).
	Nodegroups map[string]string
	// ExtJobCache is ext_job_cache: a returner added to every job's ret.
	ExtJobCache string
	// OrderMasters is order_masters: a syndic's master passes the job's
	// timeout on.
	OrderMasters bool
	// SockDir is sock_dir, with root_dir applied: where reactord's Salt
	// engine listens by default (EngineSocket).
	SockDir string
}

// EngineSocket is where reactord's Salt engine listens by default:
// sock_dir/reactord.ipc.
func (c MasterConfig) EngineSocket() string {
	return filepath.Join(c.SockDir, EngineSocketName)
}

// EngineSocketName is the engine's socket in the master's sock_dir.
const EngineSocketName = "reactord.ipc"

// URI is the master's request server as a ZeroMQ endpoint: an interface
// of 0.0.0.0 (or ::) is reached on the loopback address.
func (c MasterConfig) URI() string {
	host := c.Interface
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(c.RetPort))
}

// KeyFile is the key file the salt command reads for user: root's
// becomes the master's user's when the master does not run as root, and a
// sudo_ user reads the master's user's, as salt.utils.master.get_master_key
// does.
func (c MasterConfig) KeyFile(user string) string {
	if user == "root" && c.User != "" && c.User != "root" {
		user = c.User
	}
	if strings.HasPrefix(user, "sudo_") {
		user = c.User
		if user == "" {
			user = "root"
		}
	}
	return filepath.Join(c.CacheDir, "."+user+"_key")
}

// ReadMasterConfig reads a Salt master's configuration: DIR/master (or
// the file itself) and, as Salt's default_include does, DIR/master.d/*.conf
// in name order, later files winning. A missing master file is Salt's
// defaults.
func ReadMasterConfig(path string) (MasterConfig, error) {
	c := MasterConfig{Interface: "0.0.0.0", RetPort: 4506, CacheDir: "/var/cache/salt/master", SockDir: "/var/run/salt/master", User: "root", Nodegroups: map[string]string{}}
	main := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		main = filepath.Join(path, "master")
	}
	files := []string{main}
	inc, _ := filepath.Glob(filepath.Join(filepath.Dir(main), "master.d", "*.conf"))
	sort.Strings(inc)
	files = append(files, inc...)
	raw := map[string]any{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if os.IsNotExist(err) && f == main {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("reading the master configuration: %w", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(src, &m); err != nil {
			return c, fmt.Errorf("%s: %w", f, err)
		}
		for k, v := range m {
			raw[k] = v
		}
	}
	rootDir := "/"
	if s, ok := raw["root_dir"].(string); ok && s != "" {
		rootDir = s
	}
	if s, ok := raw["interface"].(string); ok && s != "" {
		c.Interface = s
	}
	if n, ok := raw["ret_port"].(int); ok && n > 0 {
		c.RetPort = n
	}
	if s, ok := raw["cachedir"].(string); ok && s != "" {
		c.CacheDir = s
	}
	c.CacheDir = underRoot(rootDir, c.CacheDir)
	if s, ok := raw["sock_dir"].(string); ok && s != "" {
		c.SockDir = s
	}
	c.SockDir = underRoot(rootDir, c.SockDir)
	if s, ok := raw["user"].(string); ok && s != "" {
		c.User = s
	}
	if s, ok := raw["ext_job_cache"].(string); ok {
		c.ExtJobCache = s
	}
	if b, ok := raw["order_masters"].(bool); ok {
		c.OrderMasters = b
	}
	if ng, ok := raw["nodegroups"].(map[string]any); ok {
		for name, v := range ng {
			switch v := v.(type) {
			case string:
				c.Nodegroups[name] = v
			case []any:
				words := make([]string, 0, len(v))
				for _, w := range v {
					words = append(words, fmt.Sprint(w))
				}
				c.Nodegroups[name] = strings.Join(words, " ")
			}
		}
	}
	return c, nil
}

// underRoot applies root_dir to a path as salt.config.prepend_root_dir
// does: a path already under root_dir stays, any other is put under it.
func underRoot(root, path string) string {
	root = filepath.Clean(root)
	if root == "/" || path == root || strings.HasPrefix(path, root+"/") {
		return path
	}
	return filepath.Join(root, path)
}
