#!/usr/bin/env python3
"""Reads bench/run-offload.sh's JSON (offload_rate-<transport>-<pattern>.json), prints every goal
of the offload issue with its value and whether it is met, writes offload-summary.json, and
(unless --no-plot) draws offload.png: message rate against requester threads for each method,
one panel per transport and pattern (gets, contiguous or scattered, and calls), and each
method's injection cost.

    bench/plot_offload.py bench/results [--no-plot]
"""
import json
import os
import sys

OFFLOADED = "sleep"  # the seed's dynamic offloading: the method the goals are about


def load(directory, transport, pattern):
    path = os.path.join(directory, f"offload_rate-{transport}-{pattern}.json")
    return json.load(open(path)) if os.path.exists(path) else None


def goal(rows, where, what, value, limit, at_least):
    met = value is not None and (value >= limit if at_least else value <= limit)
    rows.append({"where": where, "goal": what, "value": value,
                 "limit": ("≥ " if at_least else "≤ ") + f"{limit:g}", "met": met})


def check(report, transport, pattern):
    rows = []
    where = f"{transport}, {pattern}"
    methods = report["methods"]
    sleep = methods.get(OFFLOADED)
    if sleep is None:
        return rows
    goal(rows, where, "latency, offloaded / direct", sleep["latency_ratio_to_baseline"], 1.3,
         False)
    at_eight = [p["ratio_to_baseline"] for p in sleep["rate"] if p["threads"] >= 8]
    if at_eight:
        goal(rows, where, "rate at 8+ requesters, offloaded / direct (lowest)", min(at_eight),
             3.0 if transport == "tcp" else 1.0, True)
    inject = [p["inject_ns"] for p in sleep["rate"]]
    if len(inject) > 1:
        goal(rows, where, "injection cost, most / least over requester counts", max(inject) /
             min(inject), 2.0, False)
    goal(rows, where, "idle executor CPU (fraction of a core)",
         sleep["idle_executor_cpu_fraction"], 0.01, False)
    if "spin" in methods:
        goal(rows, where, "idle executor CPU of spin (fraction of a core)",
             methods["spin"]["idle_executor_cpu_fraction"], 0.5, True)
    goal(rows, where, "endpoints per process, engine / one context per requester",
         sleep["endpoints"] / max(sleep["endpoints_one_context_per_thread"], 1), 1.0, False)
    unbundled = methods.get(OFFLOADED + ":unbundled")
    if unbundled is not None:
        ratios = [b["per_second"] / max(u["per_second"], 1)
                  for b, u in zip(sleep["rate"], unbundled["rate"]) if b["threads"] >= 8]
        if ratios:
            goal(rows, where, "call rate at 8+ requesters, bundled / a message per call",
                 min(ratios), 1.0, True)
    return rows


def plot(reports, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = sorted(reports)
    fig, axes = plt.subplots(2, len(keys), figsize=(4.5 * len(keys), 7.5), squeeze=False)
    for column, key in enumerate(keys):
        report = reports[key]
        rate, inject = axes[0][column], axes[1][column]
        for name, m in report["methods"].items():
            threads = [p["threads"] for p in m["rate"]]
            rate.plot(threads, [p["per_second"] / 1e6 for p in m["rate"]], marker="o", label=name)
            inject.plot(threads, [p["inject_ns"] / 1e3 for p in m["rate"]], marker="o",
                        label=name)
        for ax in (rate, inject):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("requester threads")
            ax.grid(True, alpha=0.3)
        what = "calls" if key[1] == "calls" else "gets"
        rate.set_title(f"{key[0]}, {key[1]}" + ("" if what == "calls" else " gets"))
        rate.set_ylabel(f"completed {what} (M/s)")
        inject.set_yscale("log")
        inject.set_ylabel("injection cost (µs per request)")
        rate.legend(fontsize="small")
    machine = next(iter(reports.values()))["machine"]
    fig.suptitle(f"offload_rate: {machine['cpu']}, {machine['cpus']} CPUs, UCX {machine['ucx']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    directory = sys.argv[1]
    reports = {}
    for transport in ("shm", "tcp"):
        for pattern in ("contiguous", "scattered", "calls"):
            report = load(directory, transport, pattern)
            if report is not None:
                reports[(transport, pattern)] = report
    if not reports:
        print(f"plot_offload: no offload_rate-*.json in {directory}")
        return 1
    rows = []
    for (transport, pattern), report in sorted(reports.items()):
        rows += check(report, transport, pattern)
    print(f"{'where':<18} {'goal':<58} {'value':>9} {'limit':>7}  met")
    for r in rows:
        value = "-" if r["value"] is None else f"{r['value']:.3f}"
        print(f"{r['where']:<18} {r['goal']:<58} {value:>9} {r['limit']:>7}  "
              f"{'yes' if r['met'] else 'NO'}")
    with open(os.path.join(directory, "offload-summary.json"), "w") as f:
        json.dump({"goals": rows}, f, indent=2)
        f.write("\n")
    if "--no-plot" not in sys.argv:
        plot(reports, os.path.join(directory, "offload.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
