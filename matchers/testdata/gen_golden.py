#!/usr/bin/env python3
"""Regenerate fnmatch_golden.jsonl from CPython's fnmatch.

Run from the matchers directory:

    python3 testdata/gen_golden.py > testdata/fnmatch_golden.jsonl

Each output line is a JSON array [pattern, subject, expected] where
expected is fnmatch.fnmatch(subject, pattern) on a POSIX system.
"""
import fnmatch
import json
import sys
import warnings

warnings.simplefilter("ignore")  # "Possible nested set" and friends

PATTERNS = [
    "", "*", "**", "?", "??", "*?", "?*", "*/*", "*/", "/*",
    "salt/auth", "salt/*", "salt/**", "salt/?", "salt/job/*/ret/*",
    "salt/job/*/new", "salt/minion/*/start", "salt/beacon/*/diskusage/*",
    "salt/beacon/*/inotify//etc/important_file", "salt/presence/change",
    "myco/*/done", "myco/deploy/*/done", "myco/app1/*/event",
    "myco/svc2/[ab]*/alert?", "myco/svc2/[!ab]*/alert?", "myco/*/*/*",
    "*/ret/*", "*ret*", "*e*e*e*", "salt/job/[0-9]*", "salt/job/[!0-9]*",
    "salt/job/[^0-9]*", "salt/[a-m]*", "salt/[m-a]*", "salt/[!m-a]*",
    "salt/[]]*", "salt/[!]]*", "salt/[]-]*", "salt/[a-]*", "salt/[-a]*",
    "salt/[abc", "salt/[", "salt/\\*", "salt/\\?", "SALT/*", "Salt/Auth",
    "*[", "[*", "*]", "[?]*", "[*]*", "*\n*", "*é*", "salt/é?", "日本*",
    "[z-a!b]*", "[c-bz-a]", "[!--/]*", "[a--b]*", "[[:alpha:]]*",
]

SUBJECTS = [
    "", "salt", "salt/", "salt/auth", "Salt/Auth", "SALT/AUTH", "salt/a",
    "salt/job/20261122010001144547/ret/web1", "salt/job/20261122010001144547/new",
    "salt/job/x/ret/", "salt/job//ret//", "salt/minion/web1/start",
    "salt/minion/web1/start/", "salt/beacon/web1/diskusage/",
    "salt/beacon/web1/inotify//etc/important_file",
    "salt/beacon/web1/inotify/etc/important_file", "salt/presence/change",
    "myco/app/deploy/prod/done", "myco/deploy/prod/done", "myco/app1/x/event",
    "myco/svc2/api/alert1", "myco/svc2/cli/alert1", "myco/svc2/api/alert",
    "salt/]x", "salt/-x", "salt/^x", "salt/!x", "salt/[abc", "salt/[",
    "salt/*", "salt/\\x", "salt/\\?", "salt/?", "salt/é1", "salt/éé",
    "日本語", "a\nb", "\n", "[", "]", "*", "?", "b", "c", "-", ".", "/",
    "eee", "x-y", ":]", "a]", "ret", "a/b", "/",
]


def main():
    out = sys.stdout
    for p in PATTERNS:
        for s in SUBJECTS:
            json.dump([p, s, fnmatch.fnmatch(s, p)], out, ensure_ascii=False)
            out.write("\n")


if __name__ == "__main__":
    main()
