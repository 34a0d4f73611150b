package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/reactord/reactord/store"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The conformance suite runs against every backend: SQLite always, MySQL or
// MariaDB when REACTORD_TEST_MYSQL is set (a go-sql-driver DSN such as
// root@tcp(127.0.0.1:3306)/test, or a mysql:// URL), PostgreSQL when
// REACTORD_TEST_POSTGRES is set (postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
// Each test gets a database of its own: a file in a temporary directory, a
// fresh MySQL database reactord_test_<random>, a fresh PostgreSQL schema.
const (
	envMySQL    = "REACTORD_TEST_MYSQL"
	envPostgres = "REACTORD_TEST_POSTGRES"
)

var backendNames = []string{"sqlite", "mysql", "postgres"}

// testDB is a fresh database of one backend.
type testDB struct {
	name string
	// url opens a Store on the database.
	url string
	// admin is a separate single connection to the same database, for
	// Salt's own queries and for checks.
	admin *sql.DB
	// outage makes the database unavailable to the store until stop is
	// closed: SQLite holds the write lock (the store's busy timeout is
	// short), MySQL and PostgreSQL kill the store's connections over and
	// over.
	outage func(t testing.TB, stop <-chan struct{})
}

// eachBackend runs f as a subtest per backend.
func eachBackend(t *testing.T, f func(t *testing.T, db *testDB)) {
	t.Helper()
	for _, name := range backendNames {
		t.Run(name, func(t *testing.T) {
			f(t, newTestDB(t, name))
		})
	}
}

// newTestDB creates a fresh database of the named backend, or skips.
func newTestDB(t testing.TB, name string) *testDB {
	t.Helper()
	suffix := fmt.Sprintf("%012x", rand.Uint64()>>16)
	switch name {
	case "sqlite":
		return newSQLiteDB(t)
	case "mysql":
		env := os.Getenv(envMySQL)
		if env == "" {
			t.Skipf("MySQL/MariaDB tests skipped: set %s (e.g. root@tcp(127.0.0.1:3306)/test)", envMySQL)
		}
		return newMySQLDB(t, env, "reactord_test_"+suffix)
	case "postgres":
		env := os.Getenv(envPostgres)
		if env == "" {
			t.Skipf("PostgreSQL tests skipped: set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", envPostgres)
		}
		return newPostgresDB(t, env, "reactord_test_"+suffix)
	}
	t.Fatalf("unknown backend %q", name)
	return nil
}

func newSQLiteDB(t testing.TB) *testDB {
	path := filepath.Join(t.TempDir(), "audit.db")
	admin, err := sql.Open("sqlite", path+"?_busy_timeout=10000&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })
	return &testDB{
		name: "sqlite",
		// A short busy timeout, so that a held lock fails writes
		// quickly (the default is 10s).
		url:   "sqlite://" + path + "?_busy_timeout=100",
		admin: admin,
		outage: func(t testing.TB, stop <-chan struct{}) {
			ctx := context.Background()
			conn, err := admin.Conn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
				t.Error(err)
				return
			}
			<-stop
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				t.Error(err)
			}
		},
	}
}

func newMySQLDB(t testing.TB, env, dbName string) *testDB {
	cfg, err := mysqlConfig(strings.TrimPrefix(env, "mysql://"))
	if err != nil {
		t.Fatalf("%s: %v", envMySQL, err)
	}
	server := openMySQLConfig(t, cfg)
	if _, err := server.Exec("CREATE DATABASE `" + dbName + "`"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := server.Exec("DROP DATABASE IF EXISTS `" + dbName + "`"); err != nil {
			t.Errorf("drop database %s: %v", dbName, err)
		}
		server.Close()
	})
	cfg = cfg.Clone()
	cfg.DBName = dbName
	admin := openMySQLConfig(t, cfg)
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })
	return &testDB{
		name:  "mysql",
		url:   "mysql://" + cfg.FormatDSN(),
		admin: admin,
		outage: func(t testing.TB, stop <-chan struct{}) {
			// Kill the store's connections every 2 ms until stop.
			again := time.NewTicker(2 * time.Millisecond)
			defer again.Stop()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Every connection to the test database but the admin's
				// own: the store's.
				rows, err := admin.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", dbName)
				if err != nil {
					t.Error(err)
					return
				}
				var ids []int64
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						t.Error(err)
					}
					ids = append(ids, id)
				}
				rows.Close()
				for _, id := range ids {
					// Error 1094 (unknown thread) when it is already gone.
					_, _ = admin.Exec(fmt.Sprintf("KILL %d", id))
				}
				select {
				case <-stop:
					return
				case <-again.C:
				}
			}
		},
	}
}

func openMySQLConfig(t testing.TB, cfg *mysql.Config) *sql.DB {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	if err := db.Ping(); err != nil {
		t.Fatalf("MySQL at %s: %v", cfg.Addr, err)
	}
	return db
}

func newPostgresDB(t testing.TB, env, schema string) *testDB {
	server := openPostgresURL(t, env)
	if _, err := server.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := server.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		server.Close()
	})
	withParams := func(params map[string]string) string {
		u, err := url.Parse(env)
		if err != nil {
			t.Fatalf("%s: %v", envPostgres, err)
		}
		q := u.Query()
		for k, v := range params {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	// The store's connections carry the schema's name as their
	// application_name, so that the outage kills them and nothing else.
	storeURL := withParams(map[string]string{"search_path": schema, "application_name": schema})
	admin := openPostgresURL(t, withParams(map[string]string{"search_path": schema, "application_name": schema + "_admin"}))
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })
	return &testDB{
		name:  "postgres",
		url:   storeURL,
		admin: admin,
		outage: func(t testing.TB, stop <-chan struct{}) {
			// Kill the store's connections every 2 ms until stop.
			again := time.NewTicker(2 * time.Millisecond)
			defer again.Stop()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()", schema)
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case <-stop:
					return
				case <-again.C:
				}
			}
		},
	}
}

func openPostgresURL(t testing.TB, dsn string) *sql.DB {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("%s: %v", envPostgres, err)
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.Ping(); err != nil {
		t.Fatalf("PostgreSQL at %s:%d: %v", cfg.Host, cfg.Port, err)
	}
	return db
}

// open opens a Store on the database, closed at the end of the test.
func (db *testDB) open(t testing.TB) store.Store {
	t.Helper()
	return db.openWith(t, Options{})
}

// openWith is open with o.
func (db *testDB) openWith(t testing.TB, o Options) store.Store {
	t.Helper()
	s, err := OpenWith(context.Background(), db.url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// q translates a query written with ? placeholders for the admin
// connection.
func (db *testDB) q(query string) string {
	if db.name != "postgres" {
		return query
	}
	return (&sqlStore{fl: flavorPostgres}).q(query)
}

// count runs a COUNT query on the admin connection.
func (db *testDB) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.admin.QueryRow(db.q(query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
