#!/usr/bin/env python3
"""Tables, targets and the Fig. 3 style plot of bench/run-mcts.sh's JSON results.

Usage: plot_mcts.py RESULTS_DIR   (reads mcts-rate-*.json and mcts-strength.json, writes
mcts-scaling.png and mcts-summary.md there, prints the summary)."""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(directory):
    rates = {}
    for path in sorted(glob.glob(os.path.join(directory, "mcts-rate-*.json"))):
        with open(path) as f:
            r = json.load(f)
        rates[(r["configuration"], "remote" if r["remote_only"] else "local")] = r
    strength = None
    path = os.path.join(directory, "mcts-strength.json")
    if os.path.exists(path):
        with open(path) as f:
            strength = json.load(f)
    return rates, strength


def target(lines, name, value, goal, unit=""):
    met = value >= goal
    lines.append(f"| {name} | {value:.3f}{unit} | >= {goal}{unit} | {'met' if met else 'MISSED'} |")


def budget(rate):
    """A search's budget: rollouts (equal trees in every configuration) or seconds."""
    if rate.get("rollouts"):
        return f"{rate['rollouts']:,} rollouts".replace(",", " ")
    return f"{rate['seconds']} s"


def summary(rates, strength):
    lines = []
    any_rate = next(iter(rates.values()), None)
    if any_rate:
        m = any_rate["machine"]
        lines.append(f"Machine: {m['cpu']}, {m['cpus']} CPUs, Linux {m['kernel']}, UCX {m['ucx']}.")
        lines.append("")
        lines.append(f"Rollouts/s on {any_rate['board']}x{any_rate['board']} Hex from the empty "
                     f"board, K = {any_rate['playouts_per_leaf']}, channel "
                     f"{any_rate['channel']}, medians of {any_rate['reps']} searches of "
                     f"{budget(any_rate)}; the sequential reference ran in the same program, "
                     "alternating with the distributed search.")
        lines.append("")
        lines.append("| configuration | mode | rollouts/s | sequential/s | ratio | remote calls/s |")
        lines.append("|---|---|---|---|---|---|")
        for (config, mode), r in sorted(rates.items()):
            calls = sorted(r["remote_calls_per_s"])[len(r["remote_calls_per_s"]) // 2]
            lines.append(f"| {config} | {mode} | {r['median_distributed']:.0f} | "
                         f"{r['median_sequential']:.0f} | {r['ratio']:.3f} | {calls:.0f} |")
        lines.append("")
    lines.append("| target | value | goal | |")
    lines.append("|---|---|---|---|")

    def rate(config, mode):
        r = rates.get((config, mode))
        return r["median_distributed"] if r else None

    for config in ("1x1", "1x2", "2x1"):
        local, remote = rate(config, "local"), rate(config, "remote")
        if local and remote:
            target(lines, f"remote-only / local, {config}", remote / local, 0.9)
    one, two = rate("1x1", "local"), rate("1x2", "local")
    if one and two:
        target(lines, "1x2 / 1x1 (local)", two / one, 1.85)
    if ("1x1", "local") in rates:
        target(lines, "1x1 / sequential", rates[("1x1", "local")]["ratio"], 0.6)
    if strength:
        loss = 0.5 - strength["win_rate"]
        lines.append(f"| distributed loses to sequential (points) | {100 * loss:.1f} "
                     f"(+- {100 * strength['standard_error']:.1f}) | <= 5 | "
                     f"{'met' if loss <= 0.05 else 'MISSED'} |")
        lines.append("")
        lines.append(f"Strength: {strength['games']} games on {strength['board']}x"
                     f"{strength['board']}, {strength['rollouts_per_move']} rollouts per move for "
                     f"both, distributed {strength['configuration']} vs sequential, colours "
                     f"alternated: the distributed search won {strength['distributed_wins']} "
                     f"({100 * strength['win_rate']:.1f}% +- "
                     f"{100 * strength['standard_error']:.1f}, one standard error); as black "
                     f"{strength['wins_as_black']}/{strength['games_as_black']}, as white "
                     f"{strength['distributed_wins'] - strength['wins_as_black']}/"
                     f"{strength['games'] - strength['games_as_black']}; games of "
                     f"{strength['average_game_length']:.1f} moves on average.")
    return "\n".join(lines) + "\n"


def plot(rates, path):
    configs = sorted({c for c, _ in rates})
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.38
    for i, mode in enumerate(("local", "remote")):
        values = [rates[(c, mode)]["median_distributed"] if (c, mode) in rates else 0
                  for c in configs]
        ax.bar([x + (i - 0.5) * width for x in range(len(configs))], values, width,
               label="remote-only" if mode == "remote" else "local")
    sequential = [r["median_sequential"] for r in rates.values()]
    seq = sorted(sequential)[len(sequential) // 2]
    ax.axhline(seq, color="black", linestyle="--", linewidth=1, label="sequential reference")
    ax.set_xticks(range(len(configs)))
    ax.set_xticklabels([f"{c}\n(processes x threads)" for c in configs])
    ax.set_ylabel("rollouts / s")
    ax.set_title("Distributed MCTS on 11x11 Hex (K = 16)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    rates, strength = load(directory)
    if not rates and not strength:
        sys.exit(f"plot_mcts: no mcts-*.json in {directory}")
    text = summary(rates, strength)
    with open(os.path.join(directory, "mcts-summary.md"), "w") as f:
        f.write(text)
    if rates:
        plot(rates, os.path.join(directory, "mcts-scaling.png"))
    print(text, end="")


if __name__ == "__main__":
    main()
