package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/reactord/reactord/store"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/reactord/reactord/matchers"
)

// flavor is the SQL dialect of a store.
type flavor int

const (
	flavorSQLite flavor = iota
	flavorMySQL
	flavorPostgres
)

func (f flavor) String() string {
	switch f {
	case flavorMySQL:
		return "mysql"
	case flavorPostgres:
		return "postgres"
	}
	return "sqlite"
}

// sqlStore is the Store of every backend. Queries are written for MySQL and
// SQLite (backquoted identifiers, ? placeholders) and translated for
// PostgreSQL by q.
type sqlStore struct {
	db *sql.DB
	fl flavor
	// cuts counts and reports the values written cut to fit.
	cuts *Cuts
	// incr is MySQL's auto_increment_increment: the step between the ids
	// one multi-row INSERT generates.
	incr int64
	// nextID is, for PostgreSQL, the expression that draws a salt_events
	// id (the column's default, nextval('seq_salt_events_id') in Salt's
	// schema).
	nextID string
}

// q translates a query to the store's dialect.
func (s *sqlStore) q(query string) string {
	if s.fl != flavorPostgres {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		switch c := query[i]; c {
		case '`':
			b.WriteByte('"')
		case '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// timeExpr selects a time column so that scanTime can read it and its raw
// value can be bound back for comparisons: SQLite returns the stored text.
func (s *sqlStore) timeExpr(col string) string {
	if s.fl == flavorSQLite {
		return "CAST(" + col + " AS TEXT)"
	}
	return col
}

// MySQL's TIMESTAMP range.
var (
	mysqlMinTime = time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC)
	mysqlMaxTime = time.Date(2038, 1, 19, 3, 14, 7, 0, time.UTC)
)

// sqliteTimeLayout is how times are stored in SQLite: UTC, fixed width, so
// that text order is time order, and comparable with CURRENT_TIMESTAMP's
// "YYYY-MM-DD HH:MM:SS".
const sqliteTimeLayout = "2006-01-02 15:04:05.000000"

// timeArg converts t to a query argument for an alter_time column; salt
// tells whether the column is one of Salt's (whole seconds in MySQL).
func (s *sqlStore) timeArg(t time.Time, salt bool) any {
	t = t.UTC().Truncate(time.Microsecond)
	switch s.fl {
	case flavorSQLite:
		return t.Format(sqliteTimeLayout)
	case flavorMySQL:
		if salt {
			t = t.Truncate(time.Second)
		}
		if t.Before(mysqlMinTime) {
			t = mysqlMinTime
		} else if t.After(mysqlMaxTime) {
			t = mysqlMaxTime
		}
	}
	return t
}

// scanTime scans a time column of any backend and keeps the raw value for
// keyset pagination.
type scanTime struct {
	t   time.Time
	raw any
}

func (st *scanTime) Scan(v any) error {
	st.raw = v
	switch x := v.(type) {
	case nil:
		st.t = time.Time{}
	case time.Time:
		st.t = x.UTC()
	case string:
		st.t, _ = parseDBTime(x)
	case []byte:
		st.raw = string(x)
		st.t, _ = parseDBTime(string(x))
	case int64:
		st.t = time.Unix(x, 0).UTC()
	default:
		return fmt.Errorf("store: cannot read %T as a time", v)
	}
	return nil
}

// query runs a query and calls f for each row; it returns the number of
// rows read.
func (s *sqlStore) query(ctx context.Context, query string, args []any, f func(*sql.Rows) error) (int, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	return eachRow(rows, err, f)
}

// eachRow calls f for each row of a query's result and closes it; it
// returns the number of rows read.
func eachRow(rows *sql.Rows, err error, f func(*sql.Rows) error) (int, error) {
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		if err := f(rows); err != nil {
			return n, err
		}
	}
	return n, rows.Err()
}

// inTx runs f in a transaction.
func (s *sqlStore) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (s *sqlStore) Close() error {
	return s.db.Close()
}

// Rows of a batch, cleaned for the database.
type (
	jobRow struct{ jid, load string }
	retRow struct {
		fun, jid, ret, id, success, full string
		t                                time.Time
	}
	eventRow struct {
		tag, data, master, eid string
		t                      time.Time
	}
	ledgerRow struct {
		eid, tag, stage, rule, file, rid, jid, minion, detail string
		t                                                     time.Time
	}
	batchRows struct {
		jobs   []jobRow
		rets   []retRow
		events []eventRow
		ledger []ledgerRow
		// cuts are the values cut to fit their columns, counted and
		// reported once the batch is written.
		cuts cutTally
	}
)

// prepare cleans a batch for the database.
func (s *sqlStore) prepare(b store.Batch) *batchRows {
	now := time.Now().UTC()
	nul := s.fl != flavorPostgres
	at := func(t time.Time) time.Time {
		if t.IsZero() {
			return now
		}
		return t.UTC()
	}
	r := &batchRows{}
	str := func(v string, c column) string {
		out, cut := cutString(v, columnInfo[c].width, nul)
		if cut {
			r.cuts.add(c, v)
		}
		return out
	}
	if len(b.Jobs) > 0 {
		seen := make(map[string]bool, len(b.Jobs))
		for _, j := range b.Jobs {
			jid := str(j.JID, colJIDsJID)
			if seen[jid] {
				continue
			}
			seen[jid] = true
			load := j.Load
			if !j.Time.IsZero() {
				load = withStamp(load, j.Time)
			}
			r.jobs = append(r.jobs, jobRow{jid: jid, load: cleanJSON(load, nul)})
		}
	}
	for _, x := range b.Returns {
		success := "1"
		if !x.Success {
			success = "0"
		}
		if s.fl == flavorPostgres {
			success = strconv.FormatBool(x.Success)
		}
		r.rets = append(r.rets, retRow{
			fun: str(x.Fun, colReturnsFun), jid: str(x.JID, colReturnsJID), ret: cleanJSON(x.Return, nul),
			id: str(x.MinionID, colReturnsID), success: success, full: cleanJSON(x.FullRet, nul), t: at(x.Time),
		})
	}
	for _, e := range b.Events {
		r.events = append(r.events, eventRow{
			tag: str(e.Tag, colEventsTag), data: cleanJSON(e.Data, nul), master: str(e.MasterID, colEventsMasterID),
			eid: str(e.ID, colEventIDsEventID), t: at(e.Time),
		})
	}
	for _, l := range b.Ledger {
		r.ledger = append(r.ledger, ledgerRow{
			eid: str(l.EventID, colLedgerEventID), tag: str(l.Tag, colLedgerTag), stage: str(l.Stage, colLedgerStage),
			rule: str(l.Rule, colLedgerRule), file: str(l.File, colLedgerFile), rid: str(l.ReactionID, colLedgerReactionID),
			jid: str(l.JID, colLedgerJID), minion: str(l.Minion, colLedgerMinion), detail: str(l.Detail, colLedgerDetail), t: at(l.Time),
		})
	}
	return r
}

// Write appends a batch in one transaction.
func (s *sqlStore) Write(ctx context.Context, b store.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	r := s.prepare(b)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if s.fl == flavorPostgres {
			return s.writePostgres(ctx, tx, r)
		}
		return s.writeValues(ctx, tx, r)
	})
	if err != nil {
		if s.rejects(err) {
			return fmt.Errorf("store: %s write: %w: %w", s.fl, store.ErrRejected, err)
		}
		return fmt.Errorf("store: %s write: %w", s.fl, err)
	}
	s.cuts.commit(&r.cuts)
	return nil
}

// rejects reports whether err is the database refusing the data written
// (so that writing the same data again fails again), as opposed to the
// database being unavailable.
func (s *sqlStore) rejects(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1048, // column cannot be null
			1153, // packet bigger than max_allowed_packet
			1264, // out of range value
			1265, // data truncated
			1292, // incorrect datetime value
			1366, // incorrect string value
			1406, // data too long
			3140, // invalid JSON text
			4025: // MariaDB: CONSTRAINT failed
			return true
		}
		return false
	}
	if errors.Is(err, mysql.ErrPktTooLarge) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 22: data exception, 23: integrity constraint violation,
		// 54: program limit exceeded (a value too large for an index).
		class := pe.Code[:min(2, len(pe.Code))]
		return class == "22" || class == "23" || class == "54"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 18, // SQLITE_TOOBIG
			19, // SQLITE_CONSTRAINT
			20: // SQLITE_MISMATCH
			return true
		}
	}
	return false
}

// writeValues writes a batch with multi-row INSERT ... VALUES statements
// (MySQL and SQLite).
func (s *sqlStore) writeValues(ctx context.Context, tx *sql.Tx, r *batchRows) error {
	ignore := "INSERT IGNORE INTO "
	if s.fl == flavorSQLite {
		ignore = "INSERT OR IGNORE INTO "
	}
	err := s.insertValues(ctx, tx, ignore+"`jids` (`jid`, `load`) VALUES ", 2, len(r.jobs),
		func(i int, a []any) []any { return append(a, r.jobs[i].jid, r.jobs[i].load) }, nil)
	if err != nil {
		return err
	}
	err = s.insertValues(ctx, tx, "INSERT INTO `salt_returns` (`fun`, `jid`, `return`, `id`, `success`, `full_ret`, `alter_time`) VALUES ", 7, len(r.rets),
		func(i int, a []any) []any {
			x := &r.rets[i]
			return append(a, x.fun, x.jid, x.ret, x.id, x.success, x.full, s.timeArg(x.t, true))
		}, nil)
	if err != nil {
		return err
	}
	ids := make([]int64, len(r.events))
	err = s.insertValues(ctx, tx, "INSERT INTO `salt_events` (`tag`, `data`, `alter_time`, `master_id`) VALUES ", 4, len(r.events),
		func(i int, a []any) []any {
			e := &r.events[i]
			return append(a, e.tag, e.data, s.timeArg(e.t, true), e.master)
		},
		func(res sql.Result, start, n int) error {
			id, err := res.LastInsertId()
			if err != nil {
				return err
			}
			for k := range n {
				if s.fl == flavorMySQL {
					// The first id of the statement; InnoDB gives a
					// multi-row INSERT ... VALUES consecutive ids.
					ids[start+k] = id + int64(k)*s.incr
				} else {
					// The last rowid; the statement holds the write
					// lock and AUTOINCREMENT counts up by one.
					ids[start+k] = id - int64(n-1-k)
				}
			}
			return nil
		})
	if err != nil {
		return err
	}
	var mapped []int
	for i := range r.events {
		if r.events[i].eid != "" {
			mapped = append(mapped, i)
		}
	}
	err = s.insertValues(ctx, tx, "INSERT INTO `reactord_event_ids` (`salt_event_id`, `event_id`) VALUES ", 2, len(mapped),
		func(i int, a []any) []any { return append(a, ids[mapped[i]], r.events[mapped[i]].eid) }, nil)
	if err != nil {
		return err
	}
	return s.insertValues(ctx, tx, "INSERT INTO `reactord_ledger` (`event_id`, `tag`, `stage`, `rule`, `file`, `reaction_id`, `jid`, `minion`, `detail`, `alter_time`) VALUES ", 10, len(r.ledger),
		func(i int, a []any) []any {
			l := &r.ledger[i]
			return append(a, l.eid, l.tag, l.stage, l.rule, l.file, l.rid, l.jid, l.minion, l.detail, s.timeArg(l.t, false))
		}, nil)
}

// insertValues inserts n rows with as few multi-row statements as the
// database allows: head is "INSERT ... VALUES ", row appends the cols
// arguments of row i, and after (optional) sees the result of each
// statement with the index and count of its rows.
func (s *sqlStore) insertValues(ctx context.Context, tx *sql.Tx, head string, cols, n int,
	row func(i int, args []any) []any, after func(res sql.Result, start, n int) error) error {
	if n == 0 {
		return nil
	}
	// MySQL: stay well below max_allowed_packet (16MiB by default in
	// MariaDB) even after the driver escapes the values. SQLite: stay below
	// SQLITE_MAX_VARIABLE_NUMBER (32766).
	maxRows, maxBytes := 1000, 4<<20
	if s.fl == flavorSQLite {
		maxRows, maxBytes = min(500, 32000/cols), 1<<62
	}
	group := "(" + strings.Repeat("?, ", cols-1) + "?)"
	args := make([]any, 0, min(n, maxRows)*cols)
	var sb strings.Builder
	start, count, size := 0, 0, 0
	flush := func() error {
		sb.Reset()
		sb.Grow(len(head) + count*(len(group)+1))
		sb.WriteString(head)
		for k := range count {
			if k > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(group)
		}
		res, err := tx.ExecContext(ctx, sb.String(), args...)
		if err != nil {
			return err
		}
		if after != nil {
			if err := after(res, start, count); err != nil {
				return err
			}
		}
		start += count
		count, size = 0, 0
		clear(args)
		args = args[:0]
		return nil
	}
	for i := range n {
		before := len(args)
		args = row(i, args)
		for _, a := range args[before:] {
			if v, ok := a.(string); ok {
				size += len(v)
			}
		}
		count++
		if count == maxRows || size >= maxBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if count > 0 {
		return flush()
	}
	return nil
}

// writePostgres writes a batch with one INSERT ... SELECT FROM unnest(...)
// per table.
func (s *sqlStore) writePostgres(ctx context.Context, tx *sql.Tx, r *batchRows) error {
	if n := len(r.jobs); n > 0 {
		jids, loads := make([]string, n), make([]string, n)
		for i, j := range r.jobs {
			jids[i], loads[i] = j.jid, j.load
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO jids (jid, load)
			SELECT j, l::jsonb FROM unnest($1::text[], $2::text[]) AS u(j, l)
			ON CONFLICT DO NOTHING`, jids, loads)
		if err != nil {
			return err
		}
	}
	if n := len(r.rets); n > 0 {
		fun, jid, ret, id, success, full := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		at := make([]time.Time, n)
		for i, x := range r.rets {
			fun[i], jid[i], ret[i], id[i], success[i], full[i], at[i] = x.fun, x.jid, x.ret, x.id, x.success, x.full, x.t
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO salt_returns (fun, jid, "return", id, success, full_ret, alter_time)
			SELECT f, j, r::jsonb, i, s, fr::jsonb, t
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[]) AS u(f, j, r, i, s, fr, t)`,
			fun, jid, ret, id, success, full, at)
		if err != nil {
			return err
		}
	}
	if n := len(r.events); n > 0 {
		ids := make([]int64, 0, n)
		_, err := s.queryTx(ctx, tx, "SELECT "+s.nextID+" FROM generate_series(1, $1)", []any{n}, func(rows *sql.Rows) error {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		})
		if err != nil {
			return err
		}
		if len(ids) != n {
			return fmt.Errorf("drew %d salt_events ids for %d events", len(ids), n)
		}
		tag, data, master := make([]string, n), make([]string, n), make([]string, n)
		at := make([]time.Time, n)
		var mapIDs []int64
		var mapEIDs []string
		for i, e := range r.events {
			tag[i], data[i], master[i], at[i] = e.tag, e.data, e.master, e.t
			if e.eid != "" {
				mapIDs = append(mapIDs, ids[i])
				mapEIDs = append(mapEIDs, e.eid)
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO salt_events (id, tag, data, alter_time, master_id)
			SELECT i, t, d::jsonb, a, m
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::text[]) AS u(i, t, d, a, m)`,
			ids, tag, data, at, master)
		if err != nil {
			return err
		}
		if len(mapIDs) > 0 {
			_, err = tx.ExecContext(ctx, `INSERT INTO reactord_event_ids (salt_event_id, event_id)
				SELECT i, e FROM unnest($1::bigint[], $2::text[]) AS u(i, e)`, mapIDs, mapEIDs)
			if err != nil {
				return err
			}
		}
	}
	if n := len(r.ledger); n > 0 {
		cols := make([][]string, 9)
		for c := range cols {
			cols[c] = make([]string, n)
		}
		at := make([]time.Time, n)
		for i, l := range r.ledger {
			for c, v := range [...]string{l.eid, l.tag, l.stage, l.rule, l.file, l.rid, l.jid, l.minion, l.detail} {
				cols[c][i] = v
			}
			at[i] = l.t
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO reactord_ledger (event_id, tag, stage, "rule", file, reaction_id, jid, minion, detail, alter_time)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::timestamptz[])`,
			cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], at)
		if err != nil {
			return err
		}
	}
	return nil
}

// queryTx is query inside a transaction; the query is not translated.
func (s *sqlStore) queryTx(ctx context.Context, tx *sql.Tx, query string, args []any, f func(*sql.Rows) error) (int, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	return eachRow(rows, err, f)
}

// jidMargin widens the jid range a time query reads: a jid is the master's
// local time, which is within 14 hours of UTC (UTC-12 to UTC+14).
const jidMargin = 14 * time.Hour

// Jobs returns the jobs published at or after since, newest first by jid.
func (s *sqlStore) Jobs(ctx context.Context, since time.Time, limit int) ([]store.Job, error) {
	base := "SELECT `jid`, `load` FROM `jids`"
	var conds []string
	var args []any
	if !since.IsZero() {
		// jids are times: read only those that can be recent enough,
		// then compare each job's time.
		conds = append(conds, "`jid` >= ?")
		args = append(args, jidString(since.UTC().Add(-jidMargin)))
	}
	page := 0
	if limit > 0 {
		page = limit
		if !since.IsZero() {
			page = max(limit*2, 256)
		}
	}
	out := []store.Job{}
	last := ""
	for first := true; ; first = false {
		c, a := conds, args
		if !first {
			c = append(slices.Clip(c), "`jid` < ?")
			a = append(slices.Clip(a), last)
		}
		query := base
		if len(c) > 0 {
			query += " WHERE " + strings.Join(c, " AND ")
		}
		query += " ORDER BY `jid` DESC"
		if page > 0 {
			query += " LIMIT " + strconv.Itoa(page)
		}
		n, err := s.query(ctx, query, a, func(rows *sql.Rows) error {
			var j store.Job
			var load []byte
			if err := rows.Scan(&j.JID, &load); err != nil {
				return err
			}
			last = j.JID
			if limit > 0 && len(out) >= limit {
				return nil
			}
			j.Load = load
			j.Time = store.JobTime(j.JID, load)
			if !since.IsZero() && j.Time.Before(since) {
				return nil
			}
			out = append(out, j)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("store: %s jobs: %w", s.fl, err)
		}
		if page == 0 || n < page || len(out) >= limit {
			return out, nil
		}
		page = min(page*2, 1<<14)
	}
}

// Lookup returns the first return of every minion that answered jid, in
// the order they returned.
func (s *sqlStore) Lookup(ctx context.Context, jid string) ([]store.Return, error) {
	// Returns are ordered by alter_time (their _stamp, to the second in
	// MySQL), then by the _stamp of their full_ret (SQLite: by rowid,
	// which is the order of arrival).
	order := "`alter_time`, rowid"
	switch s.fl {
	case flavorMySQL:
		order = "`alter_time`, JSON_EXTRACT(`full_ret`, '$._stamp')"
	case flavorPostgres:
		order = "`alter_time`, `full_ret`->>'_stamp'"
	}
	out := []store.Return{}
	seen := map[string]bool{}
	client := ""
	_, err := s.query(ctx, "SELECT `id`, `fun`, `return`, `success`, "+s.timeExpr("`alter_time`")+" FROM `salt_returns` WHERE `jid` = ? ORDER BY "+order,
		[]any{jid}, func(rows *sql.Rows) error {
			var (
				r       = store.Return{JID: jid}
				ret     []byte
				success sql.NullString
				at      scanTime
			)
			if err := rows.Scan(&r.MinionID, &r.Fun, &ret, &success, &at); err != nil {
				return err
			}
			// Salt's local_cache keeps the first return of a minion
			// and drops later ones.
			if seen[r.MinionID] {
				return nil
			}
			seen[r.MinionID] = true
			r.Return, r.Time = ret, at.t
			r.Success = success.String == "1" || strings.EqualFold(success.String, "true")
			if kind := store.ClientKind(r.Fun); kind != "" {
				client = kind
			}
			out = append(out, r)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: %s lookup %s: %w", s.fl, jid, err)
	}
	if client != "" {
		if err := s.clientStamps(ctx, jid, client, out); err != nil {
			return nil, fmt.Errorf("store: %s lookup %s: %w", s.fl, jid, err)
		}
	}
	return out, nil
}

// clientStamps gives the returns of a runner or wheel job (kind "run" or
// "wheel") the _stamp of the job's salt/<kind>/<jid>/new event, when that
// event is archived. Salt's master stores the job's data as it was when the
// function ended, with the _stamp its /new event put in it; the /ret
// event, which Salt fires after storing, carries a later one.
func (s *sqlStore) clientStamps(ctx context.Context, jid, kind string, rets []store.Return) error {
	var stamp json.RawMessage
	_, err := s.query(ctx, "SELECT `data` FROM `salt_events` WHERE `tag` = ? ORDER BY `id` LIMIT 1",
		[]any{"salt/" + kind + "/" + jid + "/new"}, func(rows *sql.Rows) error {
			var data []byte
			if err := rows.Scan(&data); err != nil {
				return err
			}
			var d struct {
				Stamp json.RawMessage `json:"_stamp"`
			}
			var str string
			if json.Unmarshal(data, &d) == nil && json.Unmarshal(d.Stamp, &str) == nil && str != "" {
				stamp = d.Stamp
			}
			return nil
		})
	if err != nil || stamp == nil {
		return err
	}
	for i := range rets {
		if store.ClientKind(rets[i].Fun) == kind {
			rets[i].Return = replaceTopLevel(rets[i].Return, "_stamp", stamp)
		}
	}
	return nil
}

// Events returns the events at or after since whose tag matches tagGlob,
// newest first. The database narrows by time and by the glob's literal
// prefix; the glob itself is matched here, with Salt's rules.
func (s *sqlStore) Events(ctx context.Context, since time.Time, tagGlob string, limit int) ([]store.Event, error) {
	var g *matchers.Glob
	if tagGlob != "" && tagGlob != "*" {
		g = matchers.Compile(tagGlob)
	}
	base := "SELECT e.`id`, e.`tag`, e.`data`, " + s.timeExpr("e.`alter_time`") + ", e.`master_id`, m.`event_id`" +
		" FROM `salt_events` e LEFT JOIN `reactord_event_ids` m ON m.`salt_event_id` = e.`id` WHERE "
	var conds []string
	var args []any
	if since.IsZero() {
		conds = append(conds, "e.`alter_time` IS NOT NULL")
	} else {
		conds = append(conds, "e.`alter_time` >= ?")
		args = append(args, s.timeArg(since, true))
	}
	if g != nil {
		if p := globPrefix(tagGlob); p != "" {
			conds = append(conds, "e.`tag` LIKE ? ESCAPE '!'")
			args = append(args, likeEscape(p)+"%")
		}
	}
	page := 0
	if limit > 0 {
		page = limit
		if g != nil {
			page = max(limit*2, 256)
		}
	}
	out := []store.Event{}
	var lastT any
	var lastID int64
	for first := true; ; first = false {
		c, a := conds, args
		if !first {
			c = append(slices.Clip(c), "(e.`alter_time` < ? OR (e.`alter_time` = ? AND e.`id` < ?))")
			a = append(slices.Clip(a), lastT, lastT, lastID)
		}
		query := base + strings.Join(c, " AND ") + " ORDER BY e.`alter_time` DESC, e.`id` DESC"
		if page > 0 {
			query += " LIMIT " + strconv.Itoa(page)
		}
		n, err := s.query(ctx, query, a, func(rows *sql.Rows) error {
			var (
				id     int64
				e      store.Event
				data   []byte
				at     scanTime
				master sql.NullString
				eid    sql.NullString
			)
			if err := rows.Scan(&id, &e.Tag, &data, &at, &master, &eid); err != nil {
				return err
			}
			lastT, lastID = at.raw, id
			if (limit > 0 && len(out) >= limit) || (g != nil && !g.Match(e.Tag)) {
				return nil
			}
			e.ID, e.Data, e.MasterID, e.Time = eid.String, data, master.String, at.t
			out = append(out, e)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("store: %s events: %w", s.fl, err)
		}
		if page == 0 || n < page || len(out) >= limit {
			return out, nil
		}
		page = min(page*2, 1<<14)
	}
}

// ledgerColumns are the columns Trace and Ledger read, id first.
const ledgerColumns = "`id`, `event_id`, `tag`, `stage`, `rule`, `file`, `reaction_id`, `jid`, `minion`, `detail`, "

// Trace returns the ledger entries of a jid or an event id, oldest first.
func (s *sqlStore) Trace(ctx context.Context, id string) ([]store.LedgerEntry, error) {
	type row struct {
		id int64
		store.LedgerEntry
	}
	if id == "" {
		return []store.LedgerEntry{}, nil
	}
	seen := map[int64]bool{}
	var rows []row
	read := func(where string, args []any) error {
		_, err := s.query(ctx, "SELECT "+ledgerColumns+s.timeExpr("`alter_time`")+" FROM `reactord_ledger` WHERE "+where, args,
			func(r *sql.Rows) error {
				var x row
				var at scanTime
				if err := r.Scan(&x.id, &x.EventID, &x.Tag, &x.Stage, &x.Rule, &x.File, &x.ReactionID, &x.JID, &x.Minion, &x.Detail, &at); err != nil {
					return err
				}
				if !seen[x.id] {
					seen[x.id] = true
					x.Time = at.t
					rows = append(rows, x)
				}
				return nil
			})
		return err
	}
	if err := read("`event_id` = ? OR `jid` = ?", []any{id, id}); err != nil {
		return nil, fmt.Errorf("store: %s trace: %w", s.fl, err)
	}
	// The jobs the event dispatched, and the event that dispatched the job.
	var jids, events []string
	for _, r := range rows {
		if r.EventID == id && r.JID != "" && r.JID != id && !slices.Contains(jids, r.JID) {
			jids = append(jids, r.JID)
		}
		if r.JID == id && r.Stage == store.StageDispatched && r.EventID != "" && r.EventID != id && !slices.Contains(events, r.EventID) {
			events = append(events, r.EventID)
		}
	}
	for col, vals := range map[string][]string{"jid": jids, "event_id": events} {
		for len(vals) > 0 {
			chunk := vals[:min(len(vals), 500)]
			vals = vals[len(chunk):]
			args := make([]any, len(chunk))
			for i, v := range chunk {
				args[i] = v
			}
			where := "`" + col + "` IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
			if err := read(where, args); err != nil {
				return nil, fmt.Errorf("store: %s trace: %w", s.fl, err)
			}
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return cmpInt(a.id, b.id)
	})
	out := make([]store.LedgerEntry, len(rows))
	for i, r := range rows {
		out[i] = r.LedgerEntry
	}
	return out, nil
}

// Ledger returns the entries of one stage in a span of time, optionally of
// one rule, oldest first. The span is read through the alter_time index.
func (s *sqlStore) Ledger(ctx context.Context, q store.LedgerQuery) ([]store.LedgerEntry, error) {
	if q.Stage == "" {
		return nil, store.ErrNoStage
	}
	conds := []string{s.exact("`stage`") + " = ?"}
	args := []any{q.Stage}
	if !q.Since.IsZero() {
		conds = append(conds, "`alter_time` >= ?")
		args = append(args, s.timeArg(q.Since, false))
	}
	if !q.Until.IsZero() {
		conds = append(conds, "`alter_time` < ?")
		args = append(args, s.timeArg(q.Until, false))
	}
	if q.Rule != "" {
		conds = append(conds, s.exact("`rule`")+" = ?")
		args = append(args, q.Rule)
	}
	query := "SELECT " + ledgerColumns + s.timeExpr("`alter_time`") + " FROM `reactord_ledger` WHERE " +
		strings.Join(conds, " AND ") + " ORDER BY `alter_time`, `id`"
	if q.Limit > 0 {
		query += " LIMIT " + strconv.Itoa(q.Limit)
	}
	out := []store.LedgerEntry{}
	_, err := s.query(ctx, query, args, func(r *sql.Rows) error {
		var (
			id int64
			e  store.LedgerEntry
			at scanTime
		)
		if err := r.Scan(&id, &e.EventID, &e.Tag, &e.Stage, &e.Rule, &e.File, &e.ReactionID, &e.JID, &e.Minion, &e.Detail, &at); err != nil {
			return err
		}
		e.Time = at.t
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s ledger: %w", s.fl, err)
	}
	return out, nil
}

// exact makes a text column compare with = byte for byte: MySQL's
// collations ignore case (and, PAD SPACE ones, trailing spaces).
func (s *sqlStore) exact(col string) string {
	if s.fl == flavorMySQL {
		return "CAST(" + col + " AS BINARY)"
	}
	return col
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// jidPattern is the condition that a jid is one of Salt's time-based jids.
func (s *sqlStore) jidPattern() string {
	switch s.fl {
	case flavorMySQL:
		return "`jid` REGEXP '^[0-9]{20}'"
	case flavorPostgres:
		return "`jid` ~ '^[0-9]{20}'"
	}
	return "`jid` GLOB '" + strings.Repeat("[0-9]", 20) + "*'"
}

// Purge deletes what is older than olderThan, in one transaction.
func (s *sqlStore) Purge(ctx context.Context, olderThan time.Time) (int64, error) {
	salt, ledger := s.timeArg(olderThan, true), s.timeArg(olderThan, false)
	steps := []struct {
		query string
		args  []any
		count bool
	}{
		// Salt's _purge_jobs: the jobs with old returns ...
		{"DELETE FROM `jids` WHERE `jid` IN (SELECT `jid` FROM `salt_returns` WHERE `alter_time` < ?)" +
			// ... and, as no minion may have returned, the jobs whose
			// jid is older.
			" OR (`jid` < ? AND " + s.jidPattern() + ")", []any{salt, jidString(olderThan.In(time.Local))}, true},
		{"DELETE FROM `salt_returns` WHERE `alter_time` < ?", []any{salt}, true},
		{"DELETE FROM `reactord_event_ids` WHERE `salt_event_id` IN (SELECT `id` FROM `salt_events` WHERE `alter_time` < ?)", []any{salt}, false},
		{"DELETE FROM `salt_events` WHERE `alter_time` < ?", []any{salt}, true},
		{"DELETE FROM `reactord_ledger` WHERE `alter_time` < ?", []any{ledger}, true},
	}
	var total int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, st := range steps {
			res, err := tx.ExecContext(ctx, s.q(st.query), st.args...)
			if err != nil {
				return err
			}
			if st.count {
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				total += n
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: %s purge: %w", s.fl, err)
	}
	return total, nil
}

// Rows counts the rows of each audit table, by table name: what a soak or
// an operator watches to see the store bounded by its retention. A full
// count: a scan of each table on MySQL and PostgreSQL.
func (s *sqlStore) Rows(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, t := range []string{"jids", "salt_returns", "salt_events", "reactord_ledger", "reactord_event_ids"} {
		var n int64
		if err := s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM `"+t+"`")).Scan(&n); err != nil {
			return nil, fmt.Errorf("store: %s count %s: %w", s.fl, t, err)
		}
		out[t] = n
	}
	return out, nil
}
