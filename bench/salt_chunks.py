#!/usr/bin/env python3
"""Compute, with Jinja2 and PyYAML as Salt does, the low chunks of every event
of a workload made by bench/gen_workload.py, and write them
as sorted-key JSON lines {"tag", "chunk"}. bench/replay.sh compares them with
reactord's replay output: the two must be identical.

usage: salt_chunks.py WORKDIR OUT.jsonl
"""
import json, sys, fnmatch, yaml, jinja2
work = sys.argv[1]
conf = yaml.safe_load(open(work + "/reactor-jinja.conf"))["reactor"]
rules = [(next(iter(r)), next(iter(r.values()))) for r in conf]
cache = {}
def render(path, tag, data):
    t = cache.get(path)
    if t is None:
        t = cache[path] = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(open(path).read())
    return yaml.load(t.render(tag=tag, data=data), Loader=yaml.CSafeLoader) or {}
out = open(sys.argv[2], "w")
for line in open(work + "/events.jsonl"):
    ev = json.loads(line); tag, data = ev["tag"], ev["data"]
    files = []
    for g, val in rules:
        if fnmatch.fnmatch(tag, g): files.extend(val if isinstance(val, list) else [val])
    if not files: continue
    high = {}
    for fn in files:
        try: res = render(fn, tag, data)
        except Exception: continue  # Salt logs the failed file and goes on
        for b in res.values(): b["__sls__"] = fn.replace("/jinja/", "/gotmpl/")
        high.update(res)
    chunks = []
    for rid, body in high.items():
        for key, args in body.items():
            if key.startswith("__"): continue
            state, fun = key.split(".", 1)
            low = {"state": state, "name": rid, "__sls__": body["__sls__"], "__id__": rid}
            for kv in args or []: low.update(kv)
            low["fun"] = fun; low["order"] = 1
            chunks.append(low)
    chunks.sort(key=lambda c: (c["order"], c["state"] + c["name"] + c["fun"]))
    for c in chunks:
        out.write(json.dumps({"tag": tag, "chunk": c}, sort_keys=True) + "\n")
