#!/usr/bin/env python3
"""Plays two seriema-hex command lines against each other over GTP (e.g. distributed vs sequential).

Colours alternate (A is black in even games). Each game runs until one side is connected; both
programs' final_score must name the same winner, else the script stops with an error. Both run
with --resign-threshold 0 (hex_gtp.GtpEngine), so games end on the board. Either side may be a
seriema-run job ("build/tools/seriema-run -n 2 -- build/games/hex/seriema-hex ...").

    bench/hex_head_to_head.py --games 40 [--size 11] [--label L] [--goal 0.47] [--json out.json] \
        --a "build/tools/seriema-run -n 2 -- build/games/hex/seriema-hex --quiet --rollouts 1000" \
        --b "build/games/hex/seriema-hex --quiet --engine sequential --rollouts 1000"

Prints one line per game and A's wins, win rate +- standard error and met/missed against
--goal; --json writes them. Needs no open_spiel.
"""
import argparse
import sys
import time

from hex_gtp import GtpEngine, median_ms, row_line, row_summary, write_json


def play_one(engines, a_black, size, times):
    """One game from the empty board; True if A won. Appends each move's seconds to times[side]."""
    sides = ("a", "b") if a_black else ("b", "a")
    for engine in engines.values():
        engine.new_game(size)
    for ply in range(size * size):
        mover, other = sides[ply % 2], sides[1 - ply % 2]
        colour = "b" if ply % 2 == 0 else "w"
        start = time.perf_counter()
        move = engines[mover].ask(f"genmove {colour}")
        times[mover].append(time.perf_counter() - start)
        engines[other].ask(f"play {colour} {move}")
        over, score = engines[mover].try_ask("final_score")  # refused until someone connected
        if over:
            break
    else:
        raise RuntimeError("the board filled without a winner")
    if engines[other].ask("final_score") != score:
        raise RuntimeError(f"the programs disagree on the winner: {score!r}")
    return (score == "B+") == a_black


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="seriema-hex command line A (without gtp)")
    parser.add_argument("--b", required=True, help="seriema-hex command line B (without gtp)")
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--size", type=int, default=11)
    parser.add_argument("--label", default="A against B", help="names this row in the output")
    parser.add_argument("--goal", type=float, help="the minimum win rate A must reach")
    parser.add_argument("--json", help="write the summary here")
    return parser.parse_args()


def main():
    args = parse_args()
    engines = {"a": GtpEngine(args.a), "b": GtpEngine(args.b)}
    wins, times = 0, {"a": [], "b": []}
    try:
        for i in range(args.games):
            a_black = i % 2 == 0
            won = play_one(engines, a_black, args.size, times)
            wins += won
            print(f"game {i + 1}: A {'black' if a_black else 'white'} "
                  f"{'won' if won else 'lost'} ({wins}/{i + 1})", flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    summary = row_summary(args.label, wins, args.games, args.goal, a=args.a, b=args.b,
                          size=args.size, a_ms_per_move=median_ms(times["a"]),
                          b_ms_per_move=median_ms(times["b"]))
    print(f"{row_line(summary)} (A won against B); median ms per move: "
          f"A {summary['a_ms_per_move']:.1f}, B {summary['b_ms_per_move']:.1f}")
    write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
