// Package sqlstore is the audit store (package store) in SQL databases:
// SQLite, MySQL/MariaDB or PostgreSQL, opened from a URL by Open (or
// NewLazy, which opens on first use and again after a failure). It is the
// only package that links the SQL drivers; the daemon and the command line
// import it.
//
// # Salt's tables
//
// The job and event tables are exactly the ones Salt's returners document,
// so Salt's own readers work on a database reactord writes to (and reactord
// reads what Salt wrote):
//
//   - MySQL and MariaDB use the schema of salt/returners/mysql.py: jids
//     (jid varchar(255), load mediumtext, UNIQUE KEY jid), salt_returns (fun
//     varchar(50), jid, return mediumtext, id, success varchar(10), full_ret
//     mediumtext, alter_time TIMESTAMP DEFAULT CURRENT_TIMESTAMP, keys id, jid
//     and fun) and salt_events (id BIGINT AUTO_INCREMENT primary key, tag,
//     data mediumtext, alter_time, master_id, key tag). The only change is
//     the character set: utf8mb4 instead of utf8 (utf8mb3), so that events
//     carrying 4-byte characters can be stored; reactord falls back to utf8
//     on servers whose index key limit refuses utf8mb4.
//   - PostgreSQL uses the schema of salt/returners/pgjsonb.py: the same
//     tables with load, return, full_ret and data as jsonb, alter_time as
//     TIMESTAMP WITH TIME ZONE, the events id taken from the sequence
//     seq_salt_events_id, and the btree and GIN indexes that returner
//     creates.
//   - SQLite uses the MySQL shape with TEXT columns.
//
// As in Salt's returners, success is stored as "1"/"0" in MySQL and SQLite
// (what MySQLdb writes for a Python bool) and "true"/"false" in PostgreSQL
// (what psycopg2 writes); all forms are read back.
//
// Salt's MySQL schema stores alter_time with a precision of one second, so
// the times of jobs, returns and events read back from MySQL are whole
// seconds. SQLite and PostgreSQL keep microseconds.
//
// # Writing
//
// A store's Write writes one batch in one transaction.
//
// Records are sanitised before they are written so that the database does
// not refuse a batch because of one odd record: invalid UTF-8 is replaced
// with U+FFFD, values that are not valid JSON are stored as JSON strings,
// strings are cut to the width of their columns, and (PostgreSQL only) NUL
// characters, which jsonb and text cannot hold, become U+FFFD. Every cut is
// counted per column (Cuts.Count, CutColumns) once its batch is written,
// and logged: the first at once, then a summary at most once a minute
// (Options.Cuts, each daemon's own). A write the database still refuses because of its data
// fails with an error wrapping store.ErrRejected; store.Writer then isolates and
// discards the offending record.
package sqlstore
