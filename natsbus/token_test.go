package natsbus

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/reactord/reactord/natsbus/embedded"
)

// TestEnsureTokenCreatesOnceMode0600: the first call creates a random
// token in a 0600 file; later calls (a restart) and concurrent callers get
// the same token.
func TestEnsureTokenCreatesOnceMode0600(t *testing.T) {
	dir := t.TempDir()
	tokens := make([]string, 8)
	created := make([]bool, 8)
	var wg sync.WaitGroup
	for i := range tokens {
		wg.Go(func() {
			tok, c, _, err := EnsureToken(dir)
			if err != nil {
				t.Error(err)
			}
			tokens[i], created[i] = tok, c
		})
	}
	wg.Wait()
	n := 0
	for i, tok := range tokens {
		if tok != tokens[0] || len(tok) < 40 {
			t.Fatalf("token %d = %q, token 0 = %q", i, tok, tokens[0])
		}
		if created[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d callers created the token, want 1", n)
	}
	st, err := os.Stat(TokenFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %#o, want 0600", st.Mode().Perm())
	}
	tok, c, exposed, err := EnsureToken(dir)
	if err != nil || c || exposed || tok != tokens[0] {
		t.Fatalf("second start: %q created=%v exposed=%v err=%v", tok, c, exposed, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".nats.token-*")); len(leftovers) > 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
	_ = os.Chmod(TokenFile(dir), 0o644)
	if _, _, exposed, _ := EnsureToken(dir); !exposed {
		t.Fatal("a world-readable token file is not reported")
	}
}

func TestLocalTokenOnlyForItsServer(t *testing.T) {
	dir := t.TempDir()
	tok, _, _, err := EnsureToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := LocalToken("nats://127.0.0.1:4333", dir); got != "" {
		t.Fatal("token returned with no recorded address")
	}
	if err := RecordAddr(dir, "127.0.0.1:4333"); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	for _, c := range []struct {
		url  string
		want bool
	}{
		{"nats://127.0.0.1:4333", true},
		{"nats://localhost:4333", true},
		{"127.0.0.1:4333", true},
		{"nats://127.0.0.1:4333,nats://localhost:4333", true},
		{"nats://127.0.0.1:4222", false},
		{"nats://10.1.2.3:4333", false},
		{"nats://127.0.0.1:4333,nats://nats.example.com:4333", false},
		{"nats://user:pw@127.0.0.1:4333", false},
		{"nats://127.0.0.1", false},
	} {
		got, file := LocalToken(c.url, other, dir)
		if (got == tok) != c.want || (c.want && file != TokenFile(dir)) {
			t.Errorf("LocalToken(%q) = %q, %q; want found=%v", c.url, got, file, c.want)
		}
	}
	if err := RecordAddr(dir, "0.0.0.0:4222"); err != nil {
		t.Fatal(err)
	}
	if got, _ := LocalToken("nats://127.0.0.1", dir); got != tok {
		t.Error("a server on every interface is not reached through 127.0.0.1 and the default port")
	}
}

// TestEmbeddedTokenRequired: with a token the embedded server refuses a
// client without it, naming what to do; the token lets it in.
func TestEmbeddedTokenRequired(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:-1", Token: "s3cret-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	_, err = Connect(ConnOptions{URL: srv.ClientURL(), AuthHint: "pass --nats-token-file"})
	if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "pass --nats-token-file") {
		t.Fatalf("without the token: %v", err)
	}
	_, err = Connect(ConnOptions{URL: srv.ClientURL(), Token: "wrong"})
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("with a wrong token: %v", err)
	}
	c, err := Connect(ConnOptions{URL: srv.ClientURL(), Token: "s3cret-token"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q", srv.Addr())
	}
}
