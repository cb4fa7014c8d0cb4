#!/usr/bin/env python3
"""Reads bench/run-groups.sh's JSON (group_rate-<transport>.json), prints every goal of the group
issue with its value and whether it is met, writes groups-summary.json, and (unless --no-plot)
draws groups.png: ordered, unordered and sequencer throughput per transport and size.

    bench/plot_groups.py bench/results [--no-plot]
"""
import json
import os
import sys

TRANSPORTS = ["shm", "shm-2", "tcp", "tcp-machines3", "tcp-machines3-put"]
DERECHO_RDMA_OVER_TCP = 4.0  # the seed: Derecho over libfabric's tcp was ~4x slower than RDMA


def load(directory, transport):
    path = os.path.join(directory, f"group_rate-{transport}.json")
    return json.load(open(path)) if os.path.exists(path) else None


def goal(rows, transport, what, value, limit, at_least):
    met = value is not None and (value >= limit if at_least else value <= limit)
    rows.append({"transport": transport, "goal": what, "value": value,
                 "limit": ("≥ " if at_least else "≤ ") + f"{limit:g}", "met": met})


def size_row(report, size):
    return next((r for r in report["throughput"] if r["bytes"] == size), None)


def check(transport, report):
    rows = []
    big = size_row(report, 10240)
    small = size_row(report, 64)
    if big:
        goal(rows, transport, "ordered / unordered, 10 KB, all senders",
             big["ordered_over_unordered"], 0.5, True)
    if small:
        goal(rows, transport, "ordered / sequencer, 64 B, all senders",
             small["ordered_over_sequencer"], 3.0, True)
    goal(rows, transport, "1-sender 64 B delivery / call_return round trip",
         report["latency"]["delivery_over_round_trip"], 3.0, False)
    for large in report.get("large", {}).get("sizes", []):
        goal(rows, transport, f"1-sender {large['bytes'] >> 10} KiB large, per receiver / put_bw",
             large["group_over_put_bw"], 0.8, True)
    return rows


def main():
    directory = sys.argv[1]
    reports = {t: load(directory, t) for t in TRANSPORTS}
    rows = []
    for t, r in reports.items():
        if r:
            rows += check(t, r)
    shm, tcp = reports.get("shm"), reports.get("tcp-machines3")
    tcp_shm = None
    if shm and tcp and size_row(shm, 10240) and size_row(tcp, 10240):
        tcp_shm = size_row(shm, 10240)["ordered_mb_s"] / size_row(tcp, 10240)["ordered_mb_s"]
    print(f"{'transport':<18} {'goal':<50} {'value':>8} {'limit':>7}  met")
    for row in rows:
        value = "-" if row["value"] is None else f"{row['value']:.2f}"
        print(f"{row['transport']:<18} {row['goal']:<50} {value:>8} {row['limit']:>7}  "
              f"{'yes' if row['met'] else 'NO'}")
    if tcp_shm is not None:
        print(f"shm / tcp across machines, ordered 10 KB: {tcp_shm:.1f}x "
              f"(Derecho: RDMA / tcp ~{DERECHO_RDMA_OVER_TCP:g}x)")
    summary = {"goals": rows, "shm_over_tcp_10k": tcp_shm,
               "derecho_rdma_over_tcp": DERECHO_RDMA_OVER_TCP,
               "pushes": {t: r["pushes"] for t, r in reports.items() if r}}
    with open(os.path.join(directory, "groups-summary.json"), "w") as out:
        json.dump(summary, out, indent=2, ensure_ascii=False)
        out.write("\n")
    if "--no-plot" in sys.argv:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    present = [t for t in TRANSPORTS if reports.get(t)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, size in zip(axes, (64, 10240)):
        labels, series = [], {"ordered": [], "unordered": [], "sequencer": []}
        for t in present:
            row = size_row(reports[t], size)
            if not row:
                continue
            labels.append(t)
            series["ordered"].append(row["ordered_mb_s"])
            series["unordered"].append(row["unordered_mb_s"])
            series["sequencer"].append(row["sequencer_mb_s"] or 0)
        xs = range(len(labels))
        for i, (name, values) in enumerate(series.items()):
            ax.bar([x + 0.27 * (i - 1) for x in xs], values, width=0.27, label=name)
        ax.set_xticks(list(xs), labels, rotation=20)
        ax.set_ylabel("delivered MB/s at member 0")
        ax.set_yscale("log")
        ax.set_title(f"all members sending, {size} B")
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "groups.png"), dpi=110)


if __name__ == "__main__":
    main()
