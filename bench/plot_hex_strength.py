#!/usr/bin/env python3
"""Table and plot of bench/run-hex-strength.sh's JSON rows (Hex playing strength, issue 23).

Usage: plot_hex_strength.py RESULTS_DIR   (reads hex-strength-*.json; writes there
hex-strength-summary.md, the table of every row with its goal, and hex-strength-budget.png plus
hex-strength-budget.json, the win rate against MCTSBot at equal playouts per budget with
standard-error bars; prints the table, where a missed goal reads MISSED)."""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROW_ORDER = ["equal-playouts", "four-times-playouts", "equal-time", "self-1x2", "self-2x1",
             "self-remote-only", "self-tcp-machines2"]


def load_rows(directory):
    rows = {}
    for path in glob.glob(os.path.join(directory, "hex-strength-*.json")):
        name = os.path.basename(path)[len("hex-strength-"):-len(".json")]
        if name != "budget":
            with open(path) as f:
                rows[name] = json.load(f)
    return rows


def speed(row):
    if "baseline_ms_per_move" in row:
        return f"{row['engine_ms_per_move']:.0f} / {row['baseline_ms_per_move']:.0f} ms"
    return f"{row['a_ms_per_move']:.0f} / {row['b_ms_per_move']:.0f} ms"


def table(rows):
    lines = ["| row | wins | win rate ± SE | goal | | ms a move (seriema-hex / other side) |",
             "|---|---:|---:|---:|---|---:|"]
    named = [n for n in ROW_ORDER if n in rows] + sorted(
        n for n in rows if n not in ROW_ORDER and not n.startswith("budget-"))
    for name in named:
        r = rows[name]
        goal = "" if r["goal"] is None else f"≥ {r['goal']:.2f}"
        verdict = "" if r["goal"] is None else ("met" if r["met"] else "MISSED")
        lines.append(f"| {name} | {r['wins']}/{r['games']} | {r['win_rate']:.3f} ± "
                     f"{r['standard_error']:.3f} | {goal} | {verdict} | {speed(r)} |")
    return lines


def budget_points(rows):
    points = [(r["baseline"]["simulations"], r) for n, r in rows.items() if n.startswith("budget-")]
    return sorted(points, key=lambda p: p[0])


def plot_budget(points, directory):
    budgets = [b for b, _ in points]
    rates = [r["win_rate"] for _, r in points]
    errors = [r["standard_error"] for _, r in points]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.errorbar(budgets, rates, yerr=errors, marker="o", capsize=4, label="seriema-hex (defaults)")
    ax.axhline(0.5, color="grey", linestyle=":", label="even")
    ax.set_xscale("log")
    ax.set_xticks(budgets)
    ax.set_xticklabels([str(b) for b in budgets])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("playouts per move, each side (11x11)")
    ax.set_ylabel("win rate against MCTSBot (± SE)")
    ax.set_title("Hex: seriema-hex against OpenSpiel MCTSBot at equal playouts")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "hex-strength-budget.png"), dpi=120)
    with open(os.path.join(directory, "hex-strength-budget.json"), "w") as f:
        json.dump([{"playouts": b, "games": r["games"], "wins": r["wins"],
                    "win_rate": r["win_rate"], "standard_error": r["standard_error"]}
                   for b, r in points], f, indent=2)


def main():
    directory = sys.argv[1]
    rows = load_rows(directory)
    lines = table(rows)
    with open(os.path.join(directory, "hex-strength-summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    points = budget_points(rows)
    if points:
        plot_budget(points, directory)
        print("win rate against budget: " + ", ".join(
            f"{b}: {r['wins']}/{r['games']}" for b, r in points))
    return 0


if __name__ == "__main__":
    sys.exit(main())
