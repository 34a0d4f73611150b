package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/internal/testfiles"
	"github.com/reactord/reactord/natsbus"
)

// TestSecretValuePrecedence: the flag's value wins, then its file, then
// the environment variable.
func TestSecretValuePrecedence(t *testing.T) {
	const env = "REACTORD_TEST_SECRET"
	file := testfiles.Secret(t, "from-file\n", 0o600)
	t.Setenv(env, "from-env")
	for _, c := range []struct {
		name, flag, file, env, want string
	}{
		{"flag wins over file and env", "from-flag", file, env, "from-flag"},
		{"file wins over env", "", file, env, "from-file"},
		{"env", "", "", env, "from-env"},
		{"nothing", "", "", "", ""},
		{"unset env", "", "", "REACTORD_TEST_UNSET", ""},
	} {
		got, err := SecretValue(c.flag, c.env, c.file)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestReadSecretFile(t *testing.T) {
	for _, c := range []struct{ content, want string }{
		{"s3cret\n", "s3cret"},
		{"s3cret\r\n", "s3cret"},
		{"s3cret", "s3cret"},
		{"s3cret\n\n", "s3cret"},
		{" pass word \n", " pass word "},
		{"postgres://u:p@db/x?sslmode=disable\n", "postgres://u:p@db/x?sslmode=disable"},
	} {
		got, err := ReadSecretFile(testfiles.Secret(t, c.content, 0o600))
		if err != nil || got != c.want {
			t.Errorf("%q: got %q, %v; want %q", c.content, got, err, c.want)
		}
	}
	if _, err := ReadSecretFile(testfiles.Secret(t, "\n", 0o600)); !errors.Is(err, ErrEmptySecret) {
		t.Errorf("empty file: %v", err)
	}
	if _, err := ReadSecretFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// A file another local user could have written is refused; a link to
	// a private file (a mounted secret) is followed.
	if _, err := ReadSecretFile(testfiles.Secret(t, "s3cret\n", 0o622)); !errors.Is(err, natsbus.ErrNotPrivate) {
		t.Errorf("a file others can write: %v, want ErrNotPrivate", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(testfiles.Secret(t, "s3cret\n", 0o600), link); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSecretFile(link); err != nil || got != "s3cret" {
		t.Errorf("a link to a private file: %q, %v", got, err)
	}
}

// TestDriverSecretFiles: the saltapi driver reads its password and token
// files, and says which flag failed.
func TestDriverSecretFiles(t *testing.T) {
	df := DriverOptions{APIURL: "http://127.0.0.1:1", APIUser: "reactord", APIEAuth: "pam", APIPasswordFile: filepath.Join(t.TempDir(), "missing")}
	if _, err := df.Driver("saltapi", nil, nil); err == nil || !strings.Contains(err.Error(), "--saltapi-password-file") {
		t.Fatalf("missing password file: %v", err)
	}
	df.APIPasswordFile = testfiles.Secret(t, "pw\n", 0o600)
	if _, err := df.Driver("saltapi", nil, nil); err != nil {
		t.Fatalf("password file: %v", err)
	}
	df = DriverOptions{APIURL: "http://127.0.0.1:1", APITokenFile: testfiles.Secret(t, "tok\n", 0o600)}
	if _, err := df.Driver("saltapi", nil, nil); err != nil {
		t.Fatalf("token file: %v", err)
	}
	t.Setenv(EnvName("saltapi-token"), "tok")
	df = DriverOptions{APIURL: "http://127.0.0.1:1"}
	if _, err := df.Driver("saltapi", nil, nil); err != nil {
		t.Fatalf("token from $%s: %v", EnvName("saltapi-token"), err)
	}
}

// TestNATSOptionsSecrets: the NATS token and password come from their
// flags, files or environment variables.
func TestNATSOptionsSecrets(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv(EnvName("nats-token"), "env-token")
	t.Setenv(EnvName("nats-password"), "env-pw")
	nf := NATSOptions{URL: "nats://127.0.0.1:1", User: "u"}
	o, err := nf.ConnOptions("t")
	if err != nil || o.Token != "env-token" || o.Password != "env-pw" {
		t.Fatalf("from env: %+v, %v", o, err)
	}
	nf.TokenFile, nf.PasswordFile = testfiles.Secret(t, "file-token\n", 0o600), testfiles.Secret(t, "file-pw\n", 0o600)
	if o, err = nf.ConnOptions("t"); err != nil || o.Token != "file-token" || o.Password != "file-pw" {
		t.Fatalf("from files: %+v, %v", o, err)
	}
	nf.Token, nf.Password = "flag-token", "flag-pw"
	if o, err = nf.ConnOptions("t"); err != nil || o.Token != "flag-token" || o.Password != "flag-pw" {
		t.Fatalf("from flags: %+v, %v", o, err)
	}
	nf = NATSOptions{URL: "nats://127.0.0.1:1", PasswordFile: filepath.Join(t.TempDir(), "missing")}
	if _, err := nf.ConnOptions("t"); err == nil || !strings.Contains(err.Error(), "--nats-password-file") {
		t.Fatalf("missing file: %v", err)
	}
}
