#!/usr/bin/env python3
"""Plays two seriema-hex command lines against each other over GTP (e.g. two playout policies).

Colours alternate (A is black in even games). Each game runs until one side is connected; both
programs' final_score must name the same winner, else the script stops with an error. Both run
with --resign-threshold 0 (hex_match.GtpEngine), so games end on the board.

    bench/hex_head_to_head.py --games 40 \
        --a "build/games/hex/seriema-hex --quiet --seconds 0.06 --rollouts 0 --playout-policy bridges" \
        --b "build/games/hex/seriema-hex --quiet --seconds 0.06 --rollouts 0 --playout-policy random"

Prints one line per game and A's wins with their standard error.
"""
import argparse
import math
import sys

from hex_match import GtpEngine  # needs open_spiel importable, as hex_match does


def play_one(engines, a_black, size):
    """One game from the empty board; True if A won."""
    black, white = (engines["a"], engines["b"]) if a_black else (engines["b"], engines["a"])
    for engine in engines.values():
        engine.ask(f"boardsize {size}")
    mover, other, colour = black, white, "b"
    for _ in range(size * size):
        move = mover.ask(f"genmove {colour}")
        other.ask(f"play {colour} {move}")
        try:
            score = mover.ask("final_score")  # an error until one side is connected
            break
        except RuntimeError:
            mover, other, colour = other, mover, "w" if colour == "b" else "b"
    else:
        raise RuntimeError("the board filled without a winner")
    if other.ask("final_score") != score:
        raise RuntimeError(f"the programs disagree on the winner: {score!r}")
    return (score == "B+") == a_black


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="seriema-hex command line A (without gtp)")
    parser.add_argument("--b", required=True, help="seriema-hex command line B (without gtp)")
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--size", type=int, default=11)
    args = parser.parse_args()

    engines = {"a": GtpEngine(args.a), "b": GtpEngine(args.b)}
    wins = 0
    try:
        for i in range(args.games):
            a_black = i % 2 == 0
            won = play_one(engines, a_black, args.size)
            wins += won
            print(f"game {i + 1}: A {'black' if a_black else 'white'} "
                  f"{'won' if won else 'lost'} ({wins}/{i + 1})", flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    rate = wins / args.games
    error = math.sqrt(rate * (1 - rate) / args.games)
    print(f"A won {wins}/{args.games} = {rate:.3f} +- {error:.3f} against B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
