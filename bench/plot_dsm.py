#!/usr/bin/env python3
"""Reads bench/run-dsm.sh's JSON (dsm_diff-<transport>.json, dsm_kernels-<kernel>-<class>-*.json),
prints the kernels' table (median seconds, speedup over the sequential kernel, seriema / MPI on
the same transport, floating / fixed home) and every goal of the shared-space issue with its
value and whether it is met, writes dsm-summary.json, and (unless --no-plot) draws dsm.png: the
diff-merge methods per transport, and the kernels' speedups per system.

    bench/plot_dsm.py bench/results S W [--no-plot]
"""
import json
import os
import sys

LAYOUTS = [("2x1-shm", "seriema 2x1 (shm)", "mpi-shm"), ("1x2-shm", "seriema 1x2", "mpi-shm"),
           ("2x1-tcp", "seriema 2x1 (tcp, 2 machines)", "mpi-tcp")]
BASELINES = [("sequential", "OpenMP 1 thread"), ("openmp", "OpenMP 2 threads"),
             ("mpi-shm", "MPI 2 ranks (shm)"), ("mpi-tcp", "MPI 2 ranks (tcp)")]
METHODS = ["floating", "floating-local", "packdiff", "scattered", "contiguous"]


def load(directory, name):
    path = os.path.join(directory, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None


def runs():
    """(key, label, MPI key) of every run a kernel's table lists, in order."""
    out = [(key, label, None) for key, label in BASELINES]
    for layout, label, mpi in LAYOUTS:
        out.append((f"dsm-{layout}", label, mpi))
        out.append((f"dsm-{layout}-fixed", label + " fixed home", mpi))
    return out


def goal(rows, what, value, limit, at_least=True):
    met = value is not None and (value >= limit if at_least else value <= limit)
    rows.append({"goal": what, "value": value,
                 "limit": ("≥ " if at_least else "≤ ") + f"{limit:g}", "met": met})


def kernel_table(directory, classes, rows, speedups):
    print(f"{'kernel':<7}{'class':<6}{'run':<40}{'seconds':>10}{'speedup':>9}{'/ MPI':>8}"
          f"{'float/fixed':>13}  verified")
    for kernel in ("ep", "cg"):
        for c in classes:
            def get(key):
                return load(directory, f"dsm_kernels-{kernel}-{c}-{key}")
            seq = get("sequential")
            for key, label, mpi_key in runs():
                r = get(key)
                if r is None:
                    continue
                t = r["median_seconds"]
                speedup = seq["median_seconds"] / t if seq else None
                speedups.setdefault(f"{kernel.upper()} {c}", []).append((label, speedup))
                m = get(mpi_key) if mpi_key else None
                over_mpi = m["median_seconds"] / t if m else None
                fixed = get(key + "-fixed") if key.startswith("dsm") else None
                gain = fixed["median_seconds"] / t if fixed else None
                print(f"{kernel.upper():<7}{c:<6}{label:<40}{t:>10.4f}"
                      f"{'-' if speedup is None else f'{speedup:.2f}':>9}"
                      f"{'' if over_mpi is None else f'{over_mpi:.2f}':>8}"
                      f"{'' if gain is None else f'{gain:.2f}':>13}  {r['verified']}")
                tag = f"{kernel.upper()} {c} {label}"
                if not r["verified"]:
                    goal(rows, f"{tag}: NAS verification", 0, 1)
                if over_mpi is not None and not key.endswith("-fixed"):
                    goal(rows, f"{tag} / MPI", over_mpi, 0.9 if kernel == "ep" else 0.5)
                if gain is not None:
                    goal(rows, f"{tag}: floating / fixed home", gain, 1.3)


def diff_goals(directory, rows, diffs):
    for transport in ("shm", "tcp"):
        r = load(directory, f"dsm_diff-{transport}")
        if r is None:
            continue
        diffs[transport] = r["median_us"]
        goal(rows, f"dsm_diff {transport}: floating / packdiff",
             r["ratio"]["floating_over_packdiff"], 0.5, False)
        goal(rows, f"dsm_diff {transport}: floating / scattered",
             r["ratio"]["floating_over_scattered"], 0.1, False)


def plot(directory, diffs, speedups):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(15, 4.5), gridspec_kw={"width_ratios": [1, 2]})
    ax = axes[0]
    for i, (transport, medians) in enumerate(diffs.items()):
        xs = [x + 0.4 * (i - 0.5) for x in range(len(METHODS))]
        ax.bar(xs, [medians.get(m, 0) for m in METHODS], width=0.4, label=transport)
    ax.set_xticks(list(range(len(METHODS))), METHODS, rotation=20)
    ax.set_yscale("log")
    ax.set_ylabel("µs per 32 KiB block, 50 % changed")
    ax.set_title("dsm_diff: merging a block into its master")
    ax.legend()
    ax = axes[1]
    groups = list(speedups)
    labels = []  # every run that any kernel has, in table order
    for g in groups:
        labels += [label for label, _ in speedups[g] if label not in labels]
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        values = [next((s for l, s in speedups[g] if l == label), None) or 0 for g in groups]
        ax.bar([x + width * (i - len(labels) / 2) for x in range(len(groups))], values,
               width=width, label=label)
    ax.set_xticks(list(range(len(groups))), groups)
    ax.set_ylabel("speedup over OpenMP 1 thread")
    ax.set_title("NAS kernels, 2 workers")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "dsm.png"), dpi=110)


def main():
    args = [a for a in sys.argv[1:] if a != "--no-plot"]
    directory, classes = args[0], args[1:]
    rows, diffs, speedups = [], {}, {}
    kernel_table(directory, classes, rows, speedups)
    diff_goals(directory, rows, diffs)
    print()
    print(f"{'goal (issue 45)':<58} {'value':>8} {'limit':>7}  met")
    for row in rows:
        value = "-" if row["value"] is None else f"{row['value']:.3f}"
        print(f"{row['goal']:<58} {value:>8} {row['limit']:>7}  {'yes' if row['met'] else 'NO'}")
    with open(os.path.join(directory, "dsm-summary.json"), "w") as out:
        json.dump({"goals": rows}, out, indent=2, ensure_ascii=False)
        out.write("\n")
    if "--no-plot" not in sys.argv:
        plot(directory, diffs, speedups)


if __name__ == "__main__":
    main()
