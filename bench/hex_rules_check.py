#!/usr/bin/env python3
"""Rules cross-check: random Hex games played in OpenSpiel and in seriema-hex must end alike.

Each game picks uniformly random legal moves on OpenSpiel's board and plays them in seriema-hex
over GTP (`play`). After every move seriema-hex's `final_score` must be refused ("game not over")
exactly while OpenSpiel's state is not terminal, and at the end name OpenSpiel's winner. The
games are spread evenly over the sizes. Any difference stops the script with the game's moves
and exit status 1; otherwise it prints the number of games (and moves) that agreed.

    bench/hex_rules_check.py --engine "build/games/hex/seriema-hex --quiet" \
        [--games 2000] [--sizes 3,5,8,11,13] [--seed 1] [--json out.json]

Needs open_spiel (bench/run-hex-strength.sh makes a venv with it).
"""
import argparse
import random
import sys

import pyspiel

from hex_gtp import GtpEngine, write_json


class RulesDiffer(Exception):
    """OpenSpiel and seriema-hex disagree about a position."""


def seriema_verdict(engine):
    """None while seriema-hex says the game is not over, else 'B' or 'W'."""
    over, score = engine.try_ask("final_score")
    if not over:
        if "not over" not in score:
            raise RuntimeError(f"final_score refused unexpectedly: {score}")
        return None
    return score[:1].upper()


def openspiel_verdict(state):
    if not state.is_terminal():
        return None
    return "B" if state.returns()[0] > 0 else "W"


def play_random_game(game, engine, size, rng):
    """Plays one random game in both; returns its number of moves or raises RulesDiffer."""
    state = game.new_initial_state()
    engine.new_game(size)
    moves = []
    while not state.is_terminal():
        action = rng.choice(state.legal_actions())
        name = state.action_to_string(state.current_player(), action)
        colour = "b" if state.current_player() == 0 else "w"
        state.apply_action(action)
        engine.ask(f"play {colour} {name}")
        moves.append(name)
        ours, theirs = seriema_verdict(engine), openspiel_verdict(state)
        if ours != theirs:
            raise RulesDiffer(f"{size}x{size} after {' '.join(moves)}: OpenSpiel says "
                              f"{theirs or 'not over'}, seriema-hex says {ours or 'not over'}")
    return len(moves)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", required=True, help="seriema-hex command line (without gtp)")
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--sizes", default="3,5,8,11,13", help="board sizes, comma-separated")
    parser.add_argument("--seed", type=int, default=1, help="seeds the random moves")
    parser.add_argument("--json", help="write the counts here")
    return parser.parse_args()


def main():
    args = parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    games = {size: pyspiel.load_game("hex", {"board_size": size}) for size in sizes}
    rng = random.Random(args.seed)
    engine = GtpEngine(args.engine)
    per_size = {size: 0 for size in sizes}
    moves = 0
    try:
        for i in range(args.games):
            size = sizes[i % len(sizes)]
            moves += play_random_game(games[size], engine, size, rng)
            per_size[size] += 1
    except RulesDiffer as difference:
        print(f"hex_rules_check: RULES DIFFER: {difference}", file=sys.stderr)
        return 1
    finally:
        engine.close()
    print(f"rules cross-check: {args.games} random games ({moves} moves) on sizes "
          f"{args.sizes}: OpenSpiel and seriema-hex agreed on every position and winner")
    write_json(args.json, {"games": args.games, "moves": moves, "seed": args.seed,
                           "games_per_size": per_size, "disagreements": 0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
