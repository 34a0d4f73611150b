// Command reactord is an event reactor for SaltStack: it reads Salt's
// reactor configuration and turns master events into the low chunks Salt's
// reactor would run.
//
// Usage:
//
//	reactord <command> [flags]
//	reactord -c CONF [flags]     (reactord run)
//
// The commands, as 'reactord help' lists them ('reactord help COMMAND'
// prints a command's flags; commands.go declares them all):
//
//	run            run the reactor daemon (the same as giving flags only)
//	shadow         run beside Salt's reactor, dispatching nothing, and compare decisions
//	shadow report  sum up the verdicts shadow mode recorded
//	render         compile the reactions of one event into Salt low chunks (JSON)
//	test           run reaction test files: events and the chunks each must make
//	rules          list the running daemon's rules, their files, load time and counts
//	check          validate a reactor configuration and its reaction files
//	replay         run recorded events through the reactor, printing reactions
//	explain        say what reactord does with one event, and why
//	fire           publish one event (or a file of events) to NATS
//	events         print events from NATS as salt-run state.event does
//	bridge         publish a Salt master's events to NATS (its event socket, or salt-api)
//	jobs           list archived jobs, or look up a job's returns
//	jobs list      list archived jobs, as salt-run jobs.list_jobs
//	jobs lookup    print a job's returns, as salt-run jobs.lookup_jid
//	trace          print the reaction ledger of a job or an event
//	convert        translate Salt Jinja reaction files into reactord Go templates
//	version        print the version, commit and Go version (also: reactord --version)
//	help           print the commands, or a command's help (help COMMAND)
//
// Exit codes: 0 success; 1 the command ran but found errors (a reaction file
// failed, the configuration has problems, events were malformed); 2 the
// command could not run (bad usage, unreadable configuration or input).
package main
