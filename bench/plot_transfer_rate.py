#!/usr/bin/env python3
"""Plots transfer_rate JSON results (paper Fig. 2): messages/s against message size, log-log, one
line per mode plus ucx_perftest, and below it each mode's ratio to ucx_perftest. Writes a PNG
next to each JSON (transfer_rate-<transport>.png) and prints which sizes meet the target.

    bench/plot_transfer_rate.py bench/results/transfer_rate-shm.json [more.json ...]
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: E402

MODES = [
    ("raw", "raw UCX (manual flush)", "tab:gray", "o"),
    ("manual", "transmitter, manual completion", "tab:blue", "s"),
    ("auto", "transmitter, automatic + circular allocator", "tab:red", "^"),
]


def size_label(value, _pos=None):
    value = int(value)
    return f"{value // 1024}K" if value >= 1024 and value % 1024 == 0 else str(value)


def plot(path):
    with open(path) as f:
        data = json.load(f)
    points = data["points"]
    sizes = [p["size"] for p in points]
    transport = data.get("transport", "?")
    target = data.get("parameters", {}).get("target", 0.9)

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]}
    )
    for key, label, color, marker in MODES:
        rates = [p[key]["msgs_per_s"] for p in points]
        top.plot(sizes, rates, marker=marker, color=color, label=label)
    have_perftest = all(p.get("perftest") for p in points)
    if have_perftest:
        top.plot(sizes, [p["perftest"]["msgs_per_s"] for p in points], marker="x", linestyle="--",
                 color="black", label="ucx_perftest ucp_put_bw (baseline)")
        for key, label, color, marker in MODES:
            bottom.plot(sizes, [p["ratios"][key] for p in points], marker=marker, color=color)
        bottom.axhline(target, color="black", linestyle=":", linewidth=1)
        bottom.text(sizes[0], target, f" target {target:g}", va="bottom", fontsize=8)
    bottom.set_ylabel("ratio to perftest")
    bottom.grid(True, which="both", alpha=0.3)
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.xaxis.set_major_formatter(FuncFormatter(size_label))
        ax.xaxis.set_minor_locator(NullLocator())
    top.set_yscale("log")
    top.set_ylabel("messages / s")
    top.grid(True, which="both", alpha=0.3)
    top.legend(fontsize=8)
    bottom.set_xlabel("message size (bytes)")
    machine = data.get("machine", {})
    top.set_title(
        f"One-sided put rate, {transport} (UCX {data.get('ucx_version', '?')}; "
        f"{machine.get('cpu_model', '?')}, {machine.get('nproc', '?')} CPUs)\n"
        f"median of {data.get('parameters', {}).get('reps', '?')} runs; {data.get('date', '')}",
        fontsize=9,
    )
    fig.tight_layout()
    png = os.path.splitext(path)[0] + ".png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    print(f"wrote {png}")

    if have_perftest:
        met = [str(p["size"]) for p in points if p["ratios"]["auto"] >= target]
        missed = [f"{p['size']} ({p['ratios']['auto']:.2f})" for p in points
                  if p["ratios"]["auto"] < target]
        print(f"[{transport}] auto >= {target:g} x ucx_perftest: met at {' '.join(met) or 'none'}; "
              f"missed at {', '.join(missed) or 'none'}")
    else:
        print(f"[{transport}] no ucx_perftest baseline in {path}")


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    status = 0
    for path in argv[1:]:
        if not os.path.exists(path):
            print(f"plot_transfer_rate: {path}: no such file", file=sys.stderr)
            status = 1
            continue
        plot(path)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
