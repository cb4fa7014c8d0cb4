#!/usr/bin/env python3
"""Reads bench/run-pipes.sh's JSON (pipe_rate-<t>.json and mpi_rma_pipe-<t>-<variant>.json, for t
in shm and tcp), prints every goal of the pipe issue with its ratio and whether it is met, writes
pipes-summary.json, and (unless --no-plot) draws pipes.png: one-way latency against size for the
pipe's two write protocols, ucx_perftest ucp_put_lat and MPI-3 RMA, one panel per transport.

    bench/plot_pipes.py bench/results [--no-plot]
"""
import json
import os
import sys


def load(directory, name):
    path = os.path.join(directory, name)
    return json.load(open(path)) if os.path.exists(path) else None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def goal(rows, transport, what, value, limit, at_least):
    met = value is not None and (value >= limit if at_least else value <= limit)
    rows.append({"transport": transport, "goal": what, "value": value,
                 "limit": ("≥ " if at_least else "≤ ") + f"{limit:g}", "met": met})


def best_mpi(directory, transport):
    """The fastest MPI variant at each size (and its name), and the best streaming rate."""
    variants = []
    for name in sorted(os.listdir(directory)):
        if name.startswith(f"mpi_rma_pipe-{transport}-") and name.endswith(".json"):
            variants.append(json.load(open(os.path.join(directory, name))))
    if not variants:
        return None
    latency = {}
    for v in variants:
        for row in v["latency"]:
            best = latency.get(row["bytes"])
            if best is None or row["one_way_us"] < best["one_way_us"]:
                latency[row["bytes"]] = {"bytes": row["bytes"], "one_way_us": row["one_way_us"],
                                         "variant": v["transport"]}
    stream = max(v["streaming_64k_mib_s"] for v in variants)
    return {"latency": [latency[b] for b in sorted(latency)], "streaming_64k_mib_s": stream,
            "variants": [v["transport"] for v in variants]}


def check(transport, pipe, mpi):
    rows = []
    lat = {row["bytes"]: row for row in pipe["latency"]}
    mpi_lat = {row["bytes"]: row["one_way_us"] for row in mpi["latency"]} if mpi else {}
    for size, row in sorted(lat.items()):
        if size <= 256:
            goal(rows, transport, f"one-way {size} B / ucp_put_lat",
                 row["one_operation_over_put_lat"], 1.25, False)
        speedup = ratio(mpi_lat.get(size), row["one_operation_us"])
        goal(rows, transport, f"fastest MPI RMA / pipe one-way, {size} B", speedup,
             3.0 if size <= 256 else 1.5, True)
        goal(rows, transport, f"data_then_flag / one_operation, {size} B (information)",
             ratio(row["data_then_flag_us"], row["one_operation_us"]), 0, True)
        goal(rows, transport, f"pull (rpost -> rget) / rwrite, {size} B (information)",
             ratio(row.get("pull_us"), row["one_operation_us"]), 0, True)
    s = pipe["streaming"]
    goal(rows, transport, "streaming 64 KiB / raw transmitter put", s["one_operation_over_raw_put"],
         0.9, True)
    goal(rows, transport, "streaming 64 KiB / ucp_put_bw", s["one_operation_over_put_bw"], 0.9,
         True)
    if mpi:
        goal(rows, transport, "streaming 64 KiB / MPI RMA (information)",
             ratio(s["one_operation_mib_s"], mpi["streaming_64k_mib_s"]), 0, True)
    trace = {row["allocator"]: row for row in pipe["trace"]}
    fixed = trace["fixed-slot ring"]["us_per_buffer"]
    goal(rows, transport, "trace: next fit / fixed-slot ring",
         ratio(trace["next fit"]["us_per_buffer"], fixed), 1.1, False)
    for name in ("best fit", "worst fit"):
        goal(rows, transport, f"trace: {name} / next fit", trace[name]["over_next_fit"], 3.5, False)
    goal(rows, transport, "trace: best-fit peak heap / next fit's",
         trace["best fit"]["peak_over_next_fit"], 0.8, False)
    return rows


def plot(directory, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5), squeeze=False)
    for ax, (transport, pipe, mpi) in zip(axes[0], results):
        sizes = [row["bytes"] for row in pipe["latency"]]
        series = [("pipe, one operation", [r["one_operation_us"] for r in pipe["latency"]], "o"),
                  ("pipe, data then flag", [r["data_then_flag_us"] for r in pipe["latency"]], "s"),
                  ("pipe, pull (rpost -> rget)", [r.get("pull_us") for r in pipe["latency"]], "D"),
                  ("ucx_perftest ucp_put_lat", [r["ucp_put_lat_us"] for r in pipe["latency"]], "^")]
        if mpi:
            series.append(("fastest MPI-3 RMA (put, flush, flag)",
                           [r["one_way_us"] for r in mpi["latency"]], "v"))
        for label, values, marker in series:
            points = [(s, v) for s, v in zip(sizes, values) if v is not None]
            if points:
                ax.plot(*zip(*points), marker=marker, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_ylabel("one-way latency (µs)")
        ax.set_title(f"{transport}: {pipe.get('publication', '')}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = os.path.join(directory, "pipes.png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    directory = args[0] if args else "bench/results"
    results, rows = [], []
    for transport in ("shm", "tcp"):
        pipe = load(directory, f"pipe_rate-{transport}.json")
        if pipe is None:
            continue
        mpi = best_mpi(directory, transport)
        if mpi:
            print(f"{transport}: MPI variants {', '.join(mpi['variants'])}")
        results.append((transport, pipe, mpi))
        rows += check(transport, pipe, mpi)
    if not results:
        sys.exit(f"plot_pipes: no pipe_rate-*.json in {directory}")
    print(f"{'tls':<4} {'goal':<52} {'value':>8} {'goal':>7}  met")
    for r in rows:
        value = "-" if r["value"] is None else f"{r['value']:.2f}"
        information = "(information)" in r["goal"]
        met = "" if information else ("yes" if r["met"] else "NO")
        limit = "" if information else r["limit"]
        print(f"{r['transport']:<4} {r['goal']:<52} {value:>8} {limit:>7}  {met}")
    with open(os.path.join(directory, "pipes-summary.json"), "w") as f:
        json.dump({"goals": [r for r in rows if "(information)" not in r["goal"]]}, f, indent=2,
                  ensure_ascii=False)
        f.write("\n")
    if "--no-plot" not in sys.argv:
        plot(directory, results)


if __name__ == "__main__":
    main()
