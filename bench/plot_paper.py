#!/usr/bin/env python3
"""Plots the paper-evaluation results written by bench/run-paper.sh:

  invoke_rate-<transport>.png  calls/s against closure size per mode (paper Fig. 2 style), with
                               the raw ucx_perftest rates and the MPI baselines of the same run;
  table2-<transport>.png       the Table 2 columns at each size as bars (send, write, trad, ovfl,
                               max-raw, MPI unbatched, MPI batched).

Also writes bench/results/paper-summary.md: the tables and the targets, for docs/performance.md.

    bench/plot_paper.py RESULTS_DIR
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = [("send", "tab:purple", "v"), ("write", "tab:blue", "o"), ("trad", "tab:red", "^"),
         ("ovfl", "tab:green", "s")]


def load(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def rate(data, mode, size):
    for p in data["points"]:
        if p["mode"] == mode and p["size"] == size:
            return p["calls_per_s"]
    return None


def raw_rate(data, test, size):
    for r in data.get("raw", []):
        if r["test"] == test and r["size"] == size:
            return r["msgs_per_s"]
    return None


def mpi_rate(mpi, mode, size):
    if mpi is None:
        return None
    for p in mpi["points"]:
        if p["mode"] == mode and p["size"] == size:
            return p["records_per_s"]
    return None


def floor_rate(floors, size):
    """The ring's records/s at `size`: the median over the repetitions of every ring_floor run
    given (run-paper.sh measures it right before and right after invoke_rate, so that a slow or
    fast spell of the VM weighs on both sides of the ratio)."""
    rates = []
    for floor in floors:
        for p in floor["points"]:
            if p["size"] == size:
                # "records" is what each repetition moved; "seconds" each repetition's time.
                rates += [p["records"] / t for t in p.get("seconds", []) if t > 0]
                if not p.get("seconds"):
                    rates.append(p["records_per_s"])
    if not rates:
        return None
    rates.sort()
    mid = len(rates) // 2
    return rates[mid] if len(rates) % 2 else (rates[mid - 1] + rates[mid]) / 2


def ratio_target(name, measured, baseline, goal):
    ratio = measured / baseline if measured and baseline else None
    return {"name": name, "ratio": ratio, "goal": goal, "met": ratio is not None and ratio >= goal}


def fmt_rate(v):
    if v is None:
        return "-"
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}k"


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def add_table(lines, intro, columns):
    """Appends an introduced table's head: the sentence, then the header and alignment rows."""
    lines += ["", intro, "", "| " + " | ".join(columns) + " |",
              "|" + "---:|" * len(columns)]


def plot_rate(directory, transport, data, mpi):
    sizes = sorted({p["size"] for p in data["points"]})
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for mode, color, marker in MODES:
        ys = [rate(data, mode, s) for s in sizes]
        if any(y is not None for y in ys):
            ax.plot(sizes, ys, marker=marker, color=color, label=mode)
    for test, label, style in [("ucp_put_bw", "max-raw (ucp_put_bw)", "k--"),
                               ("ucp_am_bw", "max-raw send (ucp_am_bw)", "k:")]:
        ys = [raw_rate(data, test, s) for s in sizes]
        if any(y is not None for y in ys):
            ax.plot(sizes, ys, style, label=label)
    for mode, style in [("unbatched", "c-."), ("batched", "m-.")]:
        ys = [mpi_rate(mpi, mode, s) for s in sizes]
        if any(y is not None for y in ys):
            ax.plot(sizes, ys, style, label=f"MPI {mode}" + (" (4 KiB)" if mode == "batched" else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel("closure / message size (bytes)")
    ax.set_ylabel("calls (messages) per second")
    machine = data.get("machine", {})
    ax.set_title(f"invoke_rate over {transport}: {machine.get('cpu', '?')}, "
                 f"{machine.get('cpus', '?')} CPUs, UCX {machine.get('ucx', '?')}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    out = os.path.join(directory, f"invoke_rate-{transport}.png")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_table2(directory, transport, data, mpi):
    sizes = sorted({p["size"] for p in data["points"]})
    columns = [("send", lambda s: rate(data, "send", s)),
               ("write", lambda s: rate(data, "write", s)),
               ("trad", lambda s: rate(data, "trad", s)),
               ("ovfl", lambda s: rate(data, "ovfl", s)),
               ("max-raw put", lambda s: raw_rate(data, "ucp_put_bw", s)),
               ("MPI", lambda s: mpi_rate(mpi, "unbatched", s)),
               ("MPI 4K", lambda s: mpi_rate(mpi, "batched", s))]
    fig, ax = plt.subplots(figsize=(9, 5))
    width = 0.8 / len(columns)
    for i, (name, get) in enumerate(columns):
        xs = [k + i * width for k in range(len(sizes))]
        ys = [get(s) or 0 for s in sizes]
        ax.bar(xs, ys, width, label=name)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(sizes))])
    ax.set_xticklabels([f"{s} B" for s in sizes])
    ax.set_yscale("log")
    ax.set_ylabel("calls (messages) per second")
    ax.set_title(f"Table 2 columns over {transport}")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=4)
    out = os.path.join(directory, f"table2-{transport}.png")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def summary(directory):
    lines = []
    for transport in ("shm", "tcp"):
        data = load(directory, f"invoke_rate-{transport}.json")
        if data is None:
            continue
        mpi = load(directory, f"mpi_rate-{transport}.json")
        lat = load(directory, f"invoke_latency-{transport}.json")
        machine = data.get("machine", {})
        lines.append(f"### {transport}")
        lines.append("")
        lines.append(f"{machine.get('cpu', '?')}, {machine.get('cpus', '?')} CPUs, Linux "
                     f"{machine.get('kernel', '?')}, UCX {machine.get('ucx', '?')}; "
                     f"{data.get('date', '?')}; medians of {data.get('repetitions', '?')} "
                     f"repetitions.")
        lines.append("")
        lines.append("| size | send | write | trad | ovfl | max-raw am | max-raw put | MPI | MPI 4K batched |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s in sorted({p["size"] for p in data["points"]}):
            lines.append(
                f"| {s} B | {fmt_rate(rate(data, 'send', s))} | {fmt_rate(rate(data, 'write', s))} | "
                f"{fmt_rate(rate(data, 'trad', s))} | {fmt_rate(rate(data, 'ovfl', s))} | "
                f"{fmt_rate(raw_rate(data, 'ucp_am_bw', s))} | "
                f"{fmt_rate(raw_rate(data, 'ucp_put_bw', s))} | "
                f"{fmt_rate(mpi_rate(mpi, 'unbatched', s))} | {fmt_rate(mpi_rate(mpi, 'batched', s))} |")
        put4k = raw_rate(data, "ucp_put_bw", 4096)
        if put4k:
            lines.append(f"| 4096 B | | | | | | {fmt_rate(put4k)} | | |")
        lines.append("")
        lines.append(f"trad and ovfl call through `{data.get('aggregated_calls', 'invoke::call')}`.")
        free = load(directory, f"invoke_rate-{transport}-free.json")
        if free is not None:
            add_table(lines, "The same two modes through `invoke::call<mode>(ctx, dest, f)` on "
                      "each call (`invoke_rate --free-calls`, measured right after): the "
                      "messenger is looked up per call and the join window is read from memory.",
                      ["size", "trad", "ovfl", "trad / MPI 4K batched"])
            for s in sorted({p["size"] for p in free["points"]}):
                t, b = rate(free, "trad", s), mpi_rate(mpi, "batched", s)
                lines.append(f"| {s} B | {fmt_rate(t)} | {fmt_rate(rate(free, 'ovfl', s))} | "
                             f"{fmt_ratio(t, b)} |")
        floors = [f for f in (load(directory, f"ring_floor-{transport}-before.json"),
                              load(directory, f"ring_floor-{transport}.json")) if f is not None]
        floor_sizes = sorted({p["size"] for f in floors for p in f["points"]})
        if floors:
            each = load(directory, f"ring_floor-{transport}-each.json")
            add_table(lines, "The same hand-off with no call machinery: a hand-written ring "
                      "between the two cores (`bench/ring_floor`, same run, right before and "
                      "right after `invoke_rate`; median of both runs' repetitions), publishing "
                      "every 4 KiB as a trad batch does; and once more publishing after every "
                      "record (`--publish-bytes 8`, measured after them), as each write-mode "
                      "call does: what a mode that makes every call visible on its own can "
                      "reach.",
                      ["size", "ring records/s", "trad / ring", "write / ring",
                       "ring, each record published", "write / that ring"])
            for s in floor_sizes:
                f = floor_rate(floors, s)
                e = floor_rate([each], s) if each is not None else None
                t, w = rate(data, "trad", s), rate(data, "write", s)
                lines.append(f"| {s} B | {fmt_rate(f)} | {fmt_ratio(t, f)} | {fmt_ratio(w, f)} | "
                             f"{fmt_rate(e)} | {fmt_ratio(w, e)} |")
        flush4k = load(directory, f"invoke_rate-{transport}-flush4k.json")
        if flush4k is not None and mpi is not None:
            add_table(lines, "trad with `SERIEMA_FLUSH_SIZE=4K` (the MPI baseline's batch size; "
                      "measured right after) against the default, which over tcp batches "
                      "32 KiB (`flush_size` auto: batches that travel as write messages).",
                      ["size", "trad 4K", "trad 4K / MPI 4K batched", "trad auto",
                       "trad auto / MPI 4K batched"])
            for s in sorted({p["size"] for p in flush4k["points"]}):
                t4, t, b = rate(flush4k, "trad", s), rate(data, "trad", s), mpi_rate(mpi, "batched", s)
                lines.append(f"| {s} B | {fmt_rate(t4)} | {fmt_ratio(t4, b)} | {fmt_rate(t)} | "
                             f"{fmt_ratio(t, b)} |")
        lines.append("")
        lines.append("| target | measured | goal | |")
        lines.append("|---|---:|---:|---|")
        targets = list(data.get("targets", []))
        if transport == "shm" and mpi is not None:
            for s in sorted({p["size"] for p in data["points"]}):
                t, b = rate(data, "trad", s), mpi_rate(mpi, "batched", s)
                ratio = t / b if t and b else None
                targets.append({"name": f"trad {s} B >= 3 x MPI batched {s} B", "ratio": ratio,
                                "goal": 3, "met": ratio is not None and ratio >= 3})
        for s in floor_sizes:
            f = floor_rate(floors, s)
            targets.append(ratio_target(f"trad {s} B >= 0.8 x ring {s} B", rate(data, "trad", s),
                                        f, 0.8))
            if s == 256:
                targets.append(ratio_target(f"write {s} B >= 0.5 x ring {s} B",
                                            rate(data, "write", s), f, 0.5))
        if flush4k is not None and mpi is not None:
            for s in sorted({p["size"] for p in flush4k["points"]}):
                b = mpi_rate(mpi, "batched", s)
                targets.append(ratio_target(f"trad {s} B, 4 KiB flush, >= 1.0 x MPI 4K batched",
                                            rate(flush4k, "trad", s), b, 1.0))
                targets.append(ratio_target(f"trad {s} B, auto flush, >= 1.5 x MPI 4K batched",
                                            rate(data, "trad", s), b, 1.5))
        if lat is not None and lat.get("raw_rtt_us"):
            for m in lat["modes"]:
                r = m["ratio_to_raw"]
                targets.append({"name": f"call_return ({m['mode']}) round trip <= 1.3 x raw AM "
                                        f"round trip ({m['median_us']:.2f} us vs "
                                        f"{lat['raw_rtt_us']:.2f} us; p99 {m['p99_us']:.2f} us)",
                                "ratio": r, "goal": 1.3, "met": r is not None and r <= 1.3})
        if lat is not None:
            # The future forms against the slot form, measured in the same run (invoke_latency).
            for t in lat.get("future_targets", []):
                name = t["target"]
                limit = float(name.split(" x ")[0].split()[-1])
                r = t["ratio"]
                met = r >= limit if ">=" in name else r <= limit
                targets.append({"name": name, "ratio": r, "goal": limit, "met": met})
        for t in targets:
            ratio = "-" if t["ratio"] is None else f"{t['ratio']:.2f}"
            lines.append(f"| {t['name']} | {ratio} | {t['goal']} | {'met' if t['met'] else 'MISSED'} |")
        lines.append("")
        lines.append(f"![calls/s over {transport}](../bench/results/invoke_rate-{transport}.png)")
        lines.append(f"![Table 2 over {transport}](../bench/results/table2-{transport}.png)")
        lines.append("")
    out = os.path.join(directory, "paper-summary.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    directory = sys.argv[1]
    for transport in ("shm", "tcp"):
        data = load(directory, f"invoke_rate-{transport}.json")
        if data is None:
            continue
        mpi = load(directory, f"mpi_rate-{transport}.json")
        print("wrote", plot_rate(directory, transport, data, mpi))
        print("wrote", plot_table2(directory, transport, data, mpi))
    print("wrote", summary(directory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
