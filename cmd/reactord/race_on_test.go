//go:build race

package main

// raceEnabled: the tests run with -race (and so do the reactord processes
// they start, this binary): a test may allow for its slower pace.
const raceEnabled = true
