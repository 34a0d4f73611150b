//go:build race

package main

// raceEnabled: the tests run with -race, so the reactord-bench binary the process
// tests start is built with it too, and a data race it reports fails them.
const raceEnabled = true
