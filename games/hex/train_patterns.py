#!/usr/bin/env python3
"""Trains the gammas of Hex's pattern priors (hex::priors) on self-play games.

Each position written by `seriema-hex selfplay` is one line: the pattern feature of the move the
engine chose, then the feature of every move it chose among (hex::pattern_features_of). The
model is Bradley-Terry over the candidates, each move weighing the gamma of its feature (Coulom,
"Computing Elo ratings of move patterns in the game of Go", 2007): the chosen move wins against
all the others. Gammas are fitted by minorization-maximization (Hunter 2004), each with a prior
of one virtual win and one virtual loss against a gamma of 1, so that rare features stay near 1.
The last tenth of each file (whole games but one) is held out and scored: log-likelihood per
position and how often the chosen move has the largest gamma, against the uniform choice.

Remaking the committed weights (games/hex/pattern_weights.inc), from the repository root:

    games/hex/train_patterns.py --generate --seriema-hex build/games/hex/seriema-hex \\
        --data /tmp/patterns --out games/hex/pattern_weights.inc

--generate plays the games first (seriema-hex selfplay, sequential engine, --rollouts 10000,
--no-pattern-priors so that the data does not depend on earlier weights; --processes games in
parallel with seeds 1..P, --games each); the engine is deterministic at a fixed seed and
rollout budget, so the same build makes the same data. Without --generate it trains on the
selfplay-*.txt files already in --data.
"""
import argparse
import glob
import hashlib
import math
import os
import subprocess
import sys
from collections import Counter

FEATURES = 4096 * 3  # hex::pattern_features
SELFPLAY_ROLLOUTS = 10000


def generate(seriema_hex, data, processes, games):
    os.makedirs(data, exist_ok=True)
    for stale in glob.glob(os.path.join(data, "selfplay-*.txt")):  # an earlier, larger run's
        os.remove(stale)
    jobs = []
    for seed in range(1, processes + 1):
        out = os.path.join(data, f"selfplay-{seed}.txt")
        command = [seriema_hex, "--engine", "sequential", "--quiet", "--rollouts",
                   str(SELFPLAY_ROLLOUTS), "--no-pattern-priors", "--seed", str(seed),
                   "selfplay", "--games", str(games), "--out", out]
        print("generating:", " ".join(command), flush=True)
        jobs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
    for job in jobs:
        if job.wait() != 0:
            for other in jobs:
                other.kill()
            sys.exit(f"train_patterns: {seriema_hex} selfplay failed ({job.returncode})")


def read_positions(paths):
    """Per file, (chosen feature, Counter of candidate features) per line; a digest of all."""
    files = []
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            content = f.read()
        digest.update(content)
        positions = []
        for number, line in enumerate(content.decode().splitlines(), 1):
            try:
                fields = [int(x) for x in line.split()]
            except ValueError:
                fields = []
            if len(fields) < 3 or any(not 0 <= x < FEATURES for x in fields):
                sys.exit(f"train_patterns: {path}:{number}: not a position line")
            chosen, candidates = fields[0], Counter(fields[1:])
            if chosen not in candidates:
                sys.exit(f"train_patterns: {path}:{number}: the chosen feature is no candidate's")
            positions.append((chosen, candidates))
        files.append(positions)
    return files, digest.hexdigest()


def fit(positions, iterations):
    """Gammas by minorization-maximization, each with one virtual win and loss against 1."""
    wins = Counter(chosen for chosen, _ in positions)
    seen = set()
    for _, candidates in positions:
        seen.update(candidates)
    gamma = {f: 1.0 for f in seen}
    for iteration in range(iterations):
        denominator = Counter()
        for _, candidates in positions:
            strength = sum(gamma[f] * n for f, n in candidates.items())
            for f, n in candidates.items():
                denominator[f] += n / strength
        gamma = {f: (wins[f] + 1) / (denominator[f] + 2 / (gamma[f] + 1)) for f in seen}
        if iteration % 10 == 9:
            print(f"iteration {iteration + 1}: log-likelihood per position "
                  f"{log_likelihood(positions, gamma):.4f}", flush=True)
    return gamma


def log_likelihood(positions, gamma):
    total = 0.0
    for chosen, candidates in positions:
        strength = sum(gamma.get(f, 1.0) * n for f, n in candidates.items())
        total += math.log(gamma.get(chosen, 1.0) / strength)
    return total / len(positions)


def top_choice_rate(positions, gamma):
    """How often the chosen move's gamma is the largest (ties share the credit)."""
    credit = 0.0
    for chosen, candidates in positions:
        best = max(gamma.get(f, 1.0) for f in candidates)
        if gamma.get(chosen, 1.0) == best:
            tied = sum(n for f, n in candidates.items() if gamma.get(f, 1.0) == best)
            credit += 1 / tied
    return credit / len(positions)


def write_weights(path, gamma, header):
    with open(path, "w") as out:
        for line in header:
            out.write(f"// {line}\n")
        for f in sorted(gamma):
            if abs(gamma[f] - 1) > 1e-3:
                rounded = float(f"{gamma[f]:.4g}")  # repr: "3.0", "0.1045", "1e-05"
                out.write(f"{{{f}, {rounded!r}F}},\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder of selfplay-*.txt")
    parser.add_argument("--out", required=True, help="the .inc file to write")
    parser.add_argument("--generate", action="store_true", help="play the games first")
    parser.add_argument("--seriema-hex", default="build/games/hex/seriema-hex")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--games", type=int, default=150, help="per process")
    parser.add_argument("--iterations", type=int, default=40)
    args = parser.parse_args()
    if args.generate:
        generate(args.seriema_hex, args.data, args.processes, args.games)
    paths = sorted(glob.glob(os.path.join(args.data, "selfplay-*.txt")))
    if not paths:
        sys.exit(f"train_patterns: no selfplay-*.txt in {args.data} (--generate makes them)")
    files, digest = read_positions(paths)
    # The last tenth of each file held out: whole games (but the one it cuts), so that no
    # held-out position has its neighbours of the same game in training.
    training, held_out = [], []
    for positions in files:
        cut = len(positions) - len(positions) // 10
        training += positions[:cut]
        held_out += positions[cut:]
    positions = training + held_out
    print(f"{len(positions)} positions from {len(paths)} files; training on {len(training)}",
          flush=True)
    gamma = fit(training, args.iterations)
    uniform = {}
    scores = {
        "held-out log-likelihood per position": (log_likelihood(held_out, gamma),
                                                 log_likelihood(held_out, uniform)),
        "held-out top-choice rate": (top_choice_rate(held_out, gamma),
                                     top_choice_rate(held_out, uniform)),
    }
    for name, (trained, flat) in scores.items():
        print(f"{name}: {trained:.4f} (uniform {flat:.4f})")
    header = [
        "Trained pattern gammas {feature, gamma} (hex::pattern_features_of); features not",
        "listed weigh 1. Written by games/hex/train_patterns.py (its docstring says how to",
        "remake them); do not edit by hand.",
        f"data: {len(positions)} positions, sha256 {digest[:16]}; {args.iterations} iterations",
    ] + [f"{name}: {trained:.4f} (uniform {flat:.4f})"
         for name, (trained, flat) in scores.items()]
    write_weights(args.out, gamma, header)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
