#!/usr/bin/env bash
# seriema-info --json: one JSON document with the machine, placement, UCX, pages and settings in
# effect, matching the environment it ran in. Usage: info_json_test.sh <seriema-info>
set -euo pipefail
info=$1
SERIEMA_THREADS=3 SERIEMA_KEEPALIVE=250ms "$info" --json --shape 1x2x3 | python3 -c '
import json, sys
d = json.load(sys.stdin)
settings = {s["name"]: s for s in d["settings"]}
assert settings["SERIEMA_THREADS"]["value"] == "3" and settings["SERIEMA_THREADS"]["set"], settings["SERIEMA_THREADS"]
assert not settings["SERIEMA_PAGES"]["set"] and settings["SERIEMA_PAGES"]["value"] == settings["SERIEMA_PAGES"]["default"]
assert d["ucx"]["keepalive_ms"] == 250, d["ucx"]
assert d["placement"]["shape"] == "1x2x3", d["placement"]
assert sum(1 for line in d["placement"]["description"] if line.startswith("thread ")) == 6, d["placement"]
assert d["machine"]["zones"] and all(z["pus_per_core"] for z in d["machine"]["zones"])
assert any(t.startswith("self/") for t in d["ucx"]["transports"]), d["ucx"]["transports"]
devices = d["machine"]["net_devices"]
assert all(x["name"] and x["kind"] in ("network", "openfabrics") for x in devices), devices
nets = d["placement"]["net_devices"]
assert len(nets["per_process"]) == 2 and nets["rule"], nets
assert all(bool(p) == bool(devices) for p in nets["per_process"]), (nets, devices)
assert d["ucx"]["net_devices_applied"] == nets["per_process"][0], (d["ucx"], nets)
assert any("segments" in s for s in d["arena"]["sources"]), d["arena"]
print("seriema-info --json:", len(settings), "settings,", len(d["ucx"]["transports"]), "transports")
'
# --settings --json lists the same table, help included.
"$info" --settings --json | python3 -c '
import json, sys
s = json.load(sys.stdin)["settings"]
assert all(x["help"] for x in s) and any(x["name"] == "SERIEMA_COUNTERS" for x in s), s
layers = {x["name"]: x["layer"] for x in s}
assert layers["SERIEMA_PAGES"] == "transfer" and layers["SERIEMA_THREADS"] == "fabric", layers
assert layers["SERIEMA_FLUSH_SIZE"] == "invoke", layers
'
# Paths between processes: direct stores within a machine where shared memory maps (the default
# transports here), the remote paths the settings choose across machines, and no direct stores
# where UCX has no mapping transport (UCX_TLS=tcp,self).
"$info" --json --no-memory --shape 2x2x1 | python3 -c '
import json, sys
p = json.load(sys.stdin)["paths"]
assert p["same_machine_maps"], p
pairs = {tuple(x["processes"]): (x["publish"], x["notices"]) for x in p["pairs"]}
assert len(pairs) == 6, pairs
for (a, b), path in pairs.items():
    same = a // 2 == b // 2
    assert path == (("direct stores", "direct stores") if same else ("write message", "message")), (a, b, path)
'
UCX_TLS=tcp,self SERIEMA_REMOTE_PUBLISH=put SERIEMA_REMOTE_NOTICES=atomic \
  "$info" --json --no-memory --shape 1x3x1 | python3 -c '
import json, sys
p = json.load(sys.stdin)["paths"]
assert not p["same_machine_maps"], p
assert all((x["publish"], x["notices"]) == ("put, fence, put", "one-sided atomic") for x in p["pairs"]), p
print("seriema-info paths: direct within a machine, settings across, none without a mapping transport")
'
