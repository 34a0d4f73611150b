// Package store is reactord's audit store, without its databases: the
// records it keeps (Salt's events, jobs and job returns, and reactord's own
// ledger of what it did with each event), the Store interface a database
// implements, the batching Writer with its disk spool, and the reading of
// Salt's job events (Classify) and job listings (Job.Listing, JIDTime).
//
// The SQL databases (SQLite, MySQL/MariaDB, PostgreSQL) and the opening of a
// store URL are in package store/sqlstore, which only the daemon and the
// command line import: the packages that write records (reactor, its
// archive and ledger) link no SQL driver.
//
// # reactord's tables
//
// reactord_ledger records what happened to an event's reactions (stages
// suppressed, dispatched, failed, returned, timeout; earlier versions also
// wrote matched and rendered), indexed by jid and event_id.
// reactord_event_ids maps a salt_events row to the reactord event id it was
// written with, for the events the ledger refers to, since Salt's
// salt_events table has no column for it.
//
// # Jobs and times
//
// Salt's jids table has no time column. A job's time is the "_stamp" of its
// load (Salt puts one, in UTC, in every salt/job/<jid>/new event; a Write
// adds Job.Time as "_stamp" when a load has none) or, failing that, the time
// encoded in the jid itself (YYYYMMDDhhmmssffffff in the master's local time
// zone, which reactord takes to be its own).
//
// # Reading like Salt
//
// Store.Lookup and Job.Listing give what salt-run jobs.lookup_jid and
// jobs.list_jobs show with Salt's default local_cache: the first return of
// each minion (in return order; Salt's is the order its cache directory
// lists), the whole data of a runner or wheel job under the master's id,
// and list_jobs' fields with StartTime formatted from the jid.
//
// # Writing
//
// Writer batches records in memory and writes them in the background with
// Store.Write, one transaction per batch, retrying while the database is
// unreachable and keeping records in a disk spool meanwhile. A write the
// database refuses because of its data fails with an error wrapping
// ErrRejected; Writer then isolates and discards the offending record.
// Classify turns Salt's job events into Job and Return records.
package store
