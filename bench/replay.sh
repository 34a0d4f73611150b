#!/usr/bin/env bash
# The replay benchmark: reactord's `replay --quiet` against the
# Salt-core baseline on the same generated workload, in one run, plus a check
# that reactord's chunks equal those Jinja2 + PyYAML produce.
#
# usage: bench/replay.sh [EVENTS] [RULES]      (defaults: 50000 60)
set -euo pipefail
cd "$(dirname "$0")/.."
events="${1:-50000}"
rules="${2:-60}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 bench/gen_workload.py "$work/wl" --events "$events" --rules "$rules" >/dev/null
go build -o "$work/reactord" ./cmd/reactord

echo "salt baseline (generous):"
base="$(python3 bench/salt_core_baseline.py "$work/wl" --mode generous)"
echo "  $base"
echo "reactord replay --quiet, Go templates and --jinja on the Jinja files, alternating (best of 3 each):"
rate_of() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["events_per_sec"])' "$1"; }
best=0
best_jinja=0
for _ in 1 2 3; do
  line="$("$work/reactord" replay -c "$work/wl/reactor-gotmpl.conf" --quiet "$work/wl/events.jsonl" 2>&1 >/dev/null | tail -1)"
  echo "  gotmpl: $line"
  rate="$(rate_of "$line")"
  [ "$rate" -gt "$best" ] && best="$rate"
  line="$("$work/reactord" replay --jinja -c "$work/wl/reactor-jinja.conf" --quiet "$work/wl/events.jsonl" 2>&1 >/dev/null | tail -1)"
  echo "  jinja:  $line"
  rate="$(rate_of "$line")"
  [ "$rate" -gt "$best_jinja" ] && best_jinja="$rate"
done
base_rate="$(rate_of "$base")"
python3 -c 'import sys; b,r=int(sys.argv[1]),int(sys.argv[2]); print("ratio: %d / %d = %.1fx" % (r, b, r/b))' "$base_rate" "$best"
python3 -c 'import sys; g,j=int(sys.argv[1]),int(sys.argv[2]); print("--jinja against Go templates: %d / %d = %.3f" % (j, g, j/g))' "$best" "$best_jinja"

echo "chunks identical to Jinja2 + PyYAML:"
python3 bench/salt_chunks.py "$work/wl" "$work/salt.jsonl"
"$work/reactord" replay -c "$work/wl/reactor-gotmpl.conf" "$work/wl/events.jsonl" 2>/dev/null \
  | python3 -c 'import sys,json
for l in sys.stdin: print(json.dumps(json.loads(l), sort_keys=True))' > "$work/reactord.jsonl"
if cmp -s "$work/salt.jsonl" "$work/reactord.jsonl"; then
  echo "  yes ($(wc -l < "$work/reactord.jsonl") chunks)"
else
  echo "  NO:"; diff "$work/salt.jsonl" "$work/reactord.jsonl" | head -20; exit 1
fi
echo "chunks of --jinja on the Jinja files identical to Jinja2 + PyYAML (but __sls__, the files' paths):"
"$work/reactord" replay --jinja -c "$work/wl/reactor-jinja.conf" "$work/wl/events.jsonl" 2>/dev/null \
  | sed 's#/sls/jinja/#/sls/gotmpl/#' \
  | python3 -c 'import sys,json
for l in sys.stdin: print(json.dumps(json.loads(l), sort_keys=True))' > "$work/jinja.jsonl"
if cmp -s "$work/salt.jsonl" "$work/jinja.jsonl"; then
  echo "  yes ($(wc -l < "$work/jinja.jsonl") chunks)"
else
  echo "  NO:"; diff "$work/salt.jsonl" "$work/jinja.jsonl" | head -20; exit 1
fi
