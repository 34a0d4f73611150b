package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/reactord/reactord/store"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/reactord/reactord/internal/redact"
)

// ErrBadURL is wrapped by Open's error when the URL itself is wrong (no
// scheme, an unknown one): retrying cannot help, unlike a database that
// does not answer yet.
var ErrBadURL = errors.New("bad store URL")

// Open opens a store from a URL and creates its tables if absent:
//
//   - sqlite:///path/file.db (absolute) or sqlite://relative.db; query
//     parameters are passed to the modernc.org/sqlite driver, which runs
//     in WAL mode with a busy timeout of 10s unless they say otherwise;
//   - mysql://user:pass@host:port/db (MySQL or MariaDB; the port defaults
//     to 3306; query parameters are go-sql-driver/mysql DSN parameters),
//     or mysql:// followed by a go-sql-driver/mysql DSN such as
//     root@tcp(127.0.0.1:3306)/salt;
//   - postgres://user@host:port/db?sslmode=disable (or postgresql://; any
//     libpq-style parameter pgx understands, search_path included).
//
// Values cut to fit their columns are counted in a Cuts of the store's own,
// reported to slog.Default(); OpenWith says where.
func Open(ctx context.Context, url string) (store.Store, error) { return OpenWith(ctx, url, Options{}) }

// Options are a store's settings beyond its URL.
type Options struct {
	// Cuts counts and reports the values Write cuts to fit their columns
	// (nil: a Cuts of the store's own, reporting to slog.Default()).
	Cuts *Cuts
}

// OpenWith is Open with o.
func OpenWith(ctx context.Context, url string, o Options) (store.Store, error) {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return nil, fmt.Errorf("store: %q is not a URL (want %s): %w", redact.URL(url), strings.Join(URLForms(), ", "), ErrBadURL)
	}
	i := slices.IndexFunc(backends, func(b backend) bool { return slices.Contains(b.schemes, strings.ToLower(scheme)) })
	if i < 0 {
		return nil, fmt.Errorf("store: unsupported scheme %q in %q (want %s): %w", scheme, redact.URL(url), strings.Join(URLForms(), ", "), ErrBadURL)
	}
	cuts := o.Cuts
	if cuts == nil {
		cuts = NewCuts(nil)
	}
	s, err := backends[i].open(ctx, rest, cuts)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", redact.URL(url), err)
	}
	return s, nil
}

// backend is one database Open takes: its URL schemes, the form its help
// shows, and how it opens the rest of the URL.
type backend struct {
	schemes []string
	form    string
	open    func(ctx context.Context, rest string, cuts *Cuts) (*sqlStore, error)
}

// backends are the databases Open takes, in the order help lists them.
var backends = []backend{
	{[]string{"sqlite", "sqlite3"}, "sqlite:///path.db", openSQLite},
	{[]string{"mysql", "mariadb"}, "mysql://...", openMySQL},
	{[]string{"postgres", "postgresql"}, "postgres://...", func(ctx context.Context, rest string, cuts *Cuts) (*sqlStore, error) {
		return openPostgres(ctx, "postgres://"+rest, cuts)
	}},
}

// URLForms are the URL forms Open takes, one per database, as help shows
// them.
func URLForms() []string {
	out := make([]string, len(backends))
	for i, b := range backends {
		out[i] = b.form
	}
	return out
}

// sqliteSchema is Salt's MySQL schema with TEXT columns, and reactord's
// tables.
var sqliteSchema = []string{
	`CREATE TABLE IF NOT EXISTS jids (
  jid TEXT NOT NULL,
  load TEXT NOT NULL,
  UNIQUE (jid)
)`,
	`CREATE TABLE IF NOT EXISTS salt_returns (
  fun TEXT NOT NULL,
  jid TEXT NOT NULL,
  "return" TEXT NOT NULL,
  id TEXT NOT NULL,
  success TEXT NOT NULL,
  full_ret TEXT NOT NULL,
  alter_time TIMESTAMP DEFAULT CURRENT_TIMESTAMP
)`,
	`CREATE INDEX IF NOT EXISTS salt_returns_id ON salt_returns (id)`,
	`CREATE INDEX IF NOT EXISTS salt_returns_jid ON salt_returns (jid)`,
	`CREATE INDEX IF NOT EXISTS salt_returns_fun ON salt_returns (fun)`,
	`CREATE TABLE IF NOT EXISTS salt_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tag TEXT NOT NULL,
  data TEXT NOT NULL,
  alter_time TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  master_id TEXT NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS salt_events_tag ON salt_events (tag)`,
	`CREATE TABLE IF NOT EXISTS reactord_ledger (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL,
  tag TEXT NOT NULL,
  stage TEXT NOT NULL,
  "rule" TEXT NOT NULL,
  file TEXT NOT NULL,
  reaction_id TEXT NOT NULL,
  jid TEXT NOT NULL,
  minion TEXT NOT NULL,
  detail TEXT NOT NULL,
  alter_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
)`,
	`CREATE INDEX IF NOT EXISTS reactord_ledger_jid ON reactord_ledger (jid)`,
	`CREATE INDEX IF NOT EXISTS reactord_ledger_event_id ON reactord_ledger (event_id)`,
	`CREATE INDEX IF NOT EXISTS reactord_ledger_alter_time ON reactord_ledger (alter_time)`,
	`CREATE TABLE IF NOT EXISTS reactord_event_ids (
  salt_event_id INTEGER PRIMARY KEY,
  event_id TEXT NOT NULL
)`,
}

// mysqlSchema is the schema of Salt's salt/returners/mysql.py (with CREATE
// TABLE IF NOT EXISTS and the character set left to %[1]s), and reactord's
// tables.
var mysqlSchema = []string{
	"CREATE TABLE IF NOT EXISTS `jids` (\n" +
		"  `jid` varchar(255) NOT NULL,\n" +
		"  `load` mediumtext NOT NULL,\n" +
		"  UNIQUE KEY `jid` (`jid`)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=%[1]s",
	"CREATE TABLE IF NOT EXISTS `salt_returns` (\n" +
		"  `fun` varchar(50) NOT NULL,\n" +
		"  `jid` varchar(255) NOT NULL,\n" +
		"  `return` mediumtext NOT NULL,\n" +
		"  `id` varchar(255) NOT NULL,\n" +
		"  `success` varchar(10) NOT NULL,\n" +
		"  `full_ret` mediumtext NOT NULL,\n" +
		"  `alter_time` TIMESTAMP DEFAULT CURRENT_TIMESTAMP,\n" +
		"  KEY `id` (`id`),\n" +
		"  KEY `jid` (`jid`),\n" +
		"  KEY `fun` (`fun`)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=%[1]s",
	"CREATE TABLE IF NOT EXISTS `salt_events` (\n" +
		"  `id` BIGINT NOT NULL AUTO_INCREMENT,\n" +
		"  `tag` varchar(255) NOT NULL,\n" +
		"  `data` mediumtext NOT NULL,\n" +
		"  `alter_time` TIMESTAMP DEFAULT CURRENT_TIMESTAMP,\n" +
		"  `master_id` varchar(255) NOT NULL,\n" +
		"  PRIMARY KEY (`id`),\n" +
		"  KEY `tag` (`tag`)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=%[1]s",
	"CREATE TABLE IF NOT EXISTS `reactord_ledger` (\n" +
		"  `id` BIGINT NOT NULL AUTO_INCREMENT,\n" +
		"  `event_id` varchar(255) NOT NULL,\n" +
		"  `tag` varchar(255) NOT NULL,\n" +
		"  `stage` varchar(32) NOT NULL,\n" +
		"  `rule` text NOT NULL,\n" +
		"  `file` text NOT NULL,\n" +
		"  `reaction_id` text NOT NULL,\n" +
		"  `jid` varchar(255) NOT NULL,\n" +
		"  `minion` varchar(255) NOT NULL,\n" +
		"  `detail` mediumtext NOT NULL,\n" +
		"  `alter_time` TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n" +
		"  PRIMARY KEY (`id`),\n" +
		"  KEY `jid` (`jid`),\n" +
		"  KEY `event_id` (`event_id`),\n" +
		"  KEY `alter_time` (`alter_time`)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=%[1]s",
	"CREATE TABLE IF NOT EXISTS `reactord_event_ids` (\n" +
		"  `salt_event_id` BIGINT NOT NULL,\n" +
		"  `event_id` varchar(255) NOT NULL,\n" +
		"  PRIMARY KEY (`salt_event_id`)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=%[1]s",
}

// postgresSchema is the schema of Salt's salt/returners/pgjsonb.py (with IF
// NOT EXISTS), and reactord's tables.
var postgresSchema = []string{
	`CREATE TABLE IF NOT EXISTS jids (
   jid varchar(255) NOT NULL primary key,
   load jsonb NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS idx_jids_jsonb on jids
       USING gin (load)
       WITH (fastupdate=on)`,
	`CREATE TABLE IF NOT EXISTS salt_returns (
  fun varchar(50) NOT NULL,
  jid varchar(255) NOT NULL,
  return jsonb NOT NULL,
  id varchar(255) NOT NULL,
  success varchar(10) NOT NULL,
  full_ret jsonb NOT NULL,
  alter_time TIMESTAMP WITH TIME ZONE DEFAULT NOW())`,
	`CREATE INDEX IF NOT EXISTS idx_salt_returns_id ON salt_returns (id)`,
	`CREATE INDEX IF NOT EXISTS idx_salt_returns_jid ON salt_returns (jid)`,
	`CREATE INDEX IF NOT EXISTS idx_salt_returns_fun ON salt_returns (fun)`,
	`CREATE INDEX IF NOT EXISTS idx_salt_returns_return ON salt_returns
    USING gin (return) with (fastupdate=on)`,
	`CREATE INDEX IF NOT EXISTS idx_salt_returns_full_ret ON salt_returns
    USING gin (full_ret) with (fastupdate=on)`,
	`CREATE SEQUENCE IF NOT EXISTS seq_salt_events_id`,
	`CREATE TABLE IF NOT EXISTS salt_events (
    id BIGINT NOT NULL UNIQUE DEFAULT nextval('seq_salt_events_id'),
    tag varchar(255) NOT NULL,
    data jsonb NOT NULL,
    alter_time TIMESTAMP WITH TIME ZONE DEFAULT NOW(),
    master_id varchar(255) NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS idx_salt_events_tag on
    salt_events (tag)`,
	`CREATE INDEX IF NOT EXISTS idx_salt_events_data ON salt_events
    USING gin (data) with (fastupdate=on)`,
	`CREATE TABLE IF NOT EXISTS reactord_ledger (
    id BIGSERIAL PRIMARY KEY,
    event_id varchar(255) NOT NULL,
    tag varchar(255) NOT NULL,
    stage varchar(32) NOT NULL,
    "rule" text NOT NULL,
    file text NOT NULL,
    reaction_id text NOT NULL,
    jid varchar(255) NOT NULL,
    minion varchar(255) NOT NULL,
    detail text NOT NULL,
    alter_time TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW())`,
	`CREATE INDEX IF NOT EXISTS idx_reactord_ledger_jid ON reactord_ledger (jid)`,
	`CREATE INDEX IF NOT EXISTS idx_reactord_ledger_event_id ON reactord_ledger (event_id)`,
	`CREATE INDEX IF NOT EXISTS idx_reactord_ledger_alter_time ON reactord_ledger (alter_time)`,
	`CREATE TABLE IF NOT EXISTS reactord_event_ids (
    salt_event_id BIGINT PRIMARY KEY,
    event_id varchar(255) NOT NULL)`,
}

// sqliteDefaults are the driver parameters a sqlite URL gets unless it sets
// them (under any of their names): WAL, synchronous FULL (a commit is on
// disk before the event it archives is acknowledged), a busy timeout, transactions
// that take the write lock when they begin, so that two writers wait for
// each other instead of failing to upgrade their locks, and temporary
// files in memory (the statement journals of the writer's multi-row
// inserts, a few rows' pages each: writing them to a file cost the default
// daemon 3-5% more CPU per event).
var sqliteDefaults = []struct {
	names  []string // the parameter and its aliases; "pragma:x" is _pragma=x(...)
	key, v string
}{
	{[]string{"_busy_timeout", "_timeout", "pragma:busy_timeout"}, "_busy_timeout", "10000"},
	{[]string{"_journal_mode", "_journal", "pragma:journal_mode"}, "_journal_mode", "WAL"},
	{[]string{"_synchronous", "_sync", "pragma:synchronous"}, "_synchronous", "FULL"},
	{[]string{"_txlock"}, "_txlock", "immediate"},
	{[]string{"pragma:temp_store"}, "_pragma", "temp_store(memory)"},
}

// openSQLite opens sqlite://<rest>.
func openSQLite(ctx context.Context, rest string, cuts *Cuts) (*sqlStore, error) {
	path, rawQuery, _ := strings.Cut(rest, "?")
	if path == "" {
		return nil, errors.New("no database file in the URL (want sqlite:///path/file.db or sqlite://relative.db)")
	}
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	for _, d := range sqliteDefaults {
		set := false
		for _, name := range d.names {
			if p, ok := strings.CutPrefix(name, "pragma:"); ok {
				for _, v := range query["_pragma"] {
					set = set || strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), p)
				}
			} else {
				set = set || query.Has(name)
			}
		}
		if !set {
			query.Add(d.key, d.v) // _pragma may come several times
		}
	}
	if err := privateFile(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", path+"?"+query.Encode())
	if err != nil {
		return nil, err
	}
	if path == ":memory:" || strings.Contains(path, "mode=memory") || strings.Contains(rawQuery, "mode=memory") {
		// Every connection to :memory: is a database of its own.
		db.SetMaxOpenConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
	} else {
		db.SetMaxOpenConns(4)
		db.SetMaxIdleConns(4)
	}
	s := &sqlStore{db: db, fl: flavorSQLite, cuts: cuts}
	if err := s.createSchema(ctx, sqliteSchema); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// mysqlConfig parses the part of a mysql:// URL after the scheme: either
// user:pass@host:port/db?params or a go-sql-driver/mysql DSN.
func mysqlConfig(rest string) (*mysql.Config, error) {
	var cfg *mysql.Config
	if strings.Contains(rest, "tcp(") || strings.Contains(rest, "unix(") {
		c, err := mysql.ParseDSN(rest)
		if err != nil {
			return nil, err
		}
		cfg = c
	} else {
		u, err := url.Parse("mysql://" + rest)
		if err != nil {
			return nil, err
		}
		c, err := mysql.ParseDSN("/?" + u.RawQuery)
		if err != nil {
			return nil, err
		}
		cfg = c
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		cfg.Net = "tcp"
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "127.0.0.1"
		}
		if port == "" {
			port = "3306"
		}
		cfg.Addr = net.JoinHostPort(host, port)
		cfg.DBName = strings.TrimPrefix(u.Path, "/")
	}
	if cfg.DBName == "" {
		return nil, errors.New("no database name in the URL (want mysql://user:pass@host:port/db)")
	}
	// Times are UTC on both sides: the session time zone decides how
	// TIMESTAMP values are written and read.
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	// One round trip per statement instead of prepare, execute, close.
	cfg.InterpolateParams = true
	// Connection errors are returned (and retried by Writer); the driver
	// would also print them.
	cfg.Logger = &mysql.NopLogger{}
	return cfg, nil
}

// openMySQL opens mysql://<rest>.
func openMySQL(ctx context.Context, rest string, cuts *Cuts) (*sqlStore, error) {
	cfg, err := mysqlConfig(rest)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &sqlStore{db: db, fl: flavorMySQL, cuts: cuts}
	if err := s.createMySQLSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.QueryRowContext(ctx, "SELECT @@auto_increment_increment").Scan(&s.incr); err != nil {
		db.Close()
		return nil, err
	}
	if s.incr < 1 {
		s.incr = 1
	}
	return s, nil
}

// createMySQLSchema creates the tables in utf8mb4, or in Salt's utf8 when
// the server's index key limit (767 bytes without large prefixes) refuses
// a varchar(255) key in utf8mb4.
func (s *sqlStore) createMySQLSchema(ctx context.Context) error {
	for _, charset := range []string{"utf8mb4", "utf8"} {
		stmts := make([]string, len(mysqlSchema))
		for i, st := range mysqlSchema {
			stmts[i] = fmt.Sprintf(st, charset)
		}
		err := s.createSchema(ctx, stmts)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1071 { // ER_TOO_LONG_KEY
			continue
		}
		return err
	}
	return nil
}

// openPostgres opens a postgres:// URL.
func openPostgres(ctx context.Context, dsn string, cuts *Cuts) (*sqlStore, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &sqlStore{db: db, fl: flavorPostgres, cuts: cuts}
	if err := s.createPostgresSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// pgSchemaLock is the advisory lock that serialises schema creation, which
// PostgreSQL does not make safe for concurrent CREATE ... IF NOT EXISTS.
const pgSchemaLock = 0x5245_4143_544f_5244 // "REACTORD"

// createPostgresSchema creates the tables and finds how salt_events draws
// its ids.
func (s *sqlStore) createPostgresSchema(ctx context.Context) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(pgSchemaLock)); err != nil {
			return err
		}
		for _, st := range postgresSchema {
			if _, err := tx.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("%w\nin: %s", err, st)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The id column's default: nextval('seq_salt_events_id'::regclass) in
	// Salt's schema, whatever it is in a table created otherwise.
	var expr sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT pg_get_expr(d.adbin, d.adrelid)
		FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
		WHERE d.adrelid = 'salt_events'::regclass AND a.attname = 'id'`).Scan(&expr)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if expr.Valid && strings.HasPrefix(expr.String, "nextval(") {
		s.nextID = expr.String
		return nil
	}
	var seq sql.NullString
	if err := s.db.QueryRowContext(ctx, "SELECT pg_get_serial_sequence('salt_events', 'id')").Scan(&seq); err != nil {
		return err
	}
	if !seq.Valid {
		return errors.New("salt_events.id has no sequence to draw ids from")
	}
	s.nextID = "nextval(" + pgQuoteLiteral(seq.String) + "::regclass)"
	return nil
}

// pgQuoteLiteral quotes s as a PostgreSQL string literal.
func pgQuoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// createSchema runs DDL statements.
func (s *sqlStore) createSchema(ctx context.Context, stmts []string) error {
	for _, st := range stmts {
		if _, err := s.db.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	return nil
}

// privateFile creates the database file path with mode 0600 when it is
// missing, and takes its group's and others' rights away when it exists:
// it holds every archived event and job return (their secrets too), and
// SQLite gives its -wal and -shm files the database file's mode.
func privateFile(path string) error {
	if path == ":memory:" || strings.HasPrefix(path, "file:") || strings.Contains(path, "mode=memory") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := f.Chmod(st.Mode().Perm() & 0o700); err != nil {
			return fmt.Errorf("making %s private: %w", path, err)
		}
		for _, side := range []string{"-wal", "-shm"} {
			if err := os.Chmod(path+side, st.Mode().Perm()&0o700); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("making %s private: %w", path+side, err)
			}
		}
	}
	return nil
}
