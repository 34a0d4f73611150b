// Package archtest holds no code, only the tests that keep the code and its
// maps in step: docs/layout.md's table of packages and docs/architecture.md's
// import picture against `go list`, the size of files and functions in the
// packages that must stay small, and the imports that must not be.
package archtest
