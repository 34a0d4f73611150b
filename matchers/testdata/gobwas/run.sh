#!/usr/bin/env bash
# Compares matchers with github.com/gobwas/glob (issue 10 #19), outside the
# reactord module so that go.mod never needs gobwas/glob: it copies the
# matchers package and the two files beside this script into a scratch
# module, then checks that the fnmatch -> gobwas translation agrees with
# matchers on every test case and benchmarks the rule table at 10, 1,000 and
# 10,000 rules. Needs the Go module proxy (or a module cache holding
# gobwas/glob), and benchstat for the summary:
#   go install golang.org/x/perf/cmd/benchstat@latest
# Usage: matchers/testdata/gobwas/run.sh [count]   (default 5)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
count="${1:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/matchers/testdata"
cp "$src"/*.go "$work/matchers/"
cp "$src/testdata/fnmatch_golden.jsonl" "$work/matchers/testdata/"
cp "$here/translate.go" "$here/compare_test.go" "$work/matchers/"
cd "$work"
export GOFLAGS=-mod=mod
go mod init scratch/gobwascmp >/dev/null 2>&1
go mod edit -go="$(go env GOVERSION | sed 's/^go//')"
go get github.com/gobwas/glob@v1.1.0 >/dev/null
go mod tidy >/dev/null 2>&1

echo "== agreement with matchers (CPython cases, golden file, exhaustive, 300,000 random pairs)"
go test -count=1 -v -run 'Gobwas' ./matchers | grep -E '^(--- |ok|FAIL)|disagreements|records' | grep -v seed
echo "== benchmarks (-count $count; load: $(cut -d' ' -f1-3 /proc/loadavg))"
go test -run '^$' -bench 'RuleTable$|RuleTableBuild|CompileOne' -benchmem -count "$count" ./matchers | tee "$work/bench.txt"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
if command -v benchstat >/dev/null 2>&1; then
  benchstat -col /impl -filter '.name:RuleTable' "$work/bench.txt"
  benchstat -col /impl -filter '.name:/RuleTableBuild|CompileOne/' "$work/bench.txt"
fi
