#!/usr/bin/env python3
"""Plays seriema-hex (over GTP) against OpenSpiel's MCTSBot, an MCTS written elsewhere.

The baseline is the textbook UCT of issue 23: one random rollout per simulation, UCT with
c = 1.4 on values in [-1, 1], the move by visit count, no solver. Colours alternate (seriema-hex
is black in even games). Every game is checked twice: OpenSpiel's returns and seriema-hex's
`final_score` must name the same winner, else the script stops with an error (the two programs'
boards or rules disagree). seriema-hex runs with --resign-threshold 0, so games end on the board.

    bench/hex_match.py --engine "build/games/hex/seriema-hex --quiet --rollouts 1000 --playouts 1" \
        --games 100 --simulations 1000 [--size 11] [--seed 1] [--json out.json]

Prints one line per game and a summary (wins, per-move times of both sides); --json writes it.
Needs open_spiel (PyPI) in the Python that runs it: bench/run-hex-strength.sh makes a venv.
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time

import pyspiel


class GtpEngine:
    """One seriema-hex gtp process; each command's answer is checked.

    Resigning is off (--resign-threshold 0): every game is played to its end, so that both
    programs' boards can name the winner."""

    def __init__(self, command):
        self.proc = subprocess.Popen(shlex.split(command) + ["gtp", "--resign-threshold", "0"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            got = self.proc.stdout.readline()
            if got == "":
                raise RuntimeError(f"seriema-hex exited while answering {line!r}")
            got = got.rstrip("\n")
            if got == "" and lines:
                break
            if got != "" or lines:
                lines.append(got)
        answer = "\n".join(lines)
        if not answer.startswith("="):
            raise RuntimeError(f"seriema-hex refused {line!r}: {answer}")
        return answer[1:].strip()

    def close(self):
        try:
            self.ask("quit")
        finally:
            self.proc.wait(timeout=30)


def baseline_bot(game, simulations, uct_c, rollouts, seed):
    # OpenSpiel's C++ MCTSBot (the Python one is some 30 times slower): UCT, no solver.
    evaluator = pyspiel.RandomRolloutEvaluator(rollouts, seed)
    return pyspiel.MCTSBot(game, evaluator, uct_c, simulations, 1000, False, seed, False)


def play_one(game, engine, bot, engine_black, size):
    """Returns (engine_won, engine_seconds_per_move list, bot_seconds_per_move list, moves)."""
    state = game.new_initial_state()
    engine.ask(f"boardsize {size}")
    engine.ask("clear_board")
    engine_times, bot_times, moves = [], [], []
    while not state.is_terminal():
        black_to_move = state.current_player() == 0
        colour = "b" if black_to_move else "w"
        if black_to_move == engine_black:
            start = time.perf_counter()
            name = engine.ask(f"genmove {colour}").lower()
            engine_times.append(time.perf_counter() - start)
            by_name = {state.action_to_string(state.current_player(), a): a
                       for a in state.legal_actions()}
            if name == "resign":
                raise RuntimeError("seriema-hex resigned, although started with "
                                   "--resign-threshold 0")
            if name not in by_name:
                raise RuntimeError(f"seriema-hex played {name!r}, not a legal move here")
            state.apply_action(by_name[name])
        else:
            start = time.perf_counter()
            action = bot.step(state)
            bot_times.append(time.perf_counter() - start)
            name = state.action_to_string(state.current_player(), action)
            state.apply_action(action)
            engine.ask(f"play {colour} {name}")
        moves.append(name)
    black_won = state.returns()[0] > 0
    score = engine.ask("final_score")
    if score[:1].upper() != ("B" if black_won else "W"):
        raise RuntimeError(f"OpenSpiel says {'black' if black_won else 'white'} won, "
                           f"seriema-hex says {score!r}: {' '.join(moves)}")
    return black_won == engine_black, engine_times, bot_times, moves


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", required=True, help="seriema-hex command line (without gtp)")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--size", type=int, default=11)
    parser.add_argument("--simulations", type=int, default=1000, help="MCTSBot simulations")
    parser.add_argument("--uct-c", type=float, default=1.4)
    parser.add_argument("--rollouts", type=int, default=1, help="MCTSBot rollouts per simulation")
    parser.add_argument("--seed", type=int, default=1, help="MCTSBot's random seed")
    parser.add_argument("--label", default="", help="names this row in the output")
    parser.add_argument("--json", help="write the summary here")
    args = parser.parse_args()

    game = pyspiel.load_game("hex", {"board_size": args.size})
    bot = baseline_bot(game, args.simulations, args.uct_c, args.rollouts, args.seed)
    engine = GtpEngine(args.engine)
    wins, engine_times, bot_times = 0, [], []
    try:
        for i in range(args.games):
            engine_black = i % 2 == 0
            won, e_times, b_times, moves = play_one(game, engine, bot, engine_black, args.size)
            wins += won
            engine_times += e_times
            bot_times += b_times
            print(f"game {i + 1}: seriema-hex {'black' if engine_black else 'white'} "
                  f"{'won' if won else 'lost'} in {len(moves)} moves "
                  f"({wins}/{i + 1})", flush=True)
    finally:
        engine.close()
    summary = {
        "label": args.label, "engine": args.engine, "games": args.games, "size": args.size,
        "baseline": {"simulations": args.simulations, "uct_c": args.uct_c,
                     "rollouts": args.rollouts, "seed": args.seed},
        "engine_wins": wins, "engine_win_rate": wins / args.games,
        "engine_ms_per_move": 1000 * statistics.median(engine_times),
        "baseline_ms_per_move": 1000 * statistics.median(bot_times),
    }
    print(f"{args.label or args.engine}: {wins}/{args.games} won against MCTSBot "
          f"({args.simulations} simulations); median ms per move: seriema-hex "
          f"{summary['engine_ms_per_move']:.1f}, MCTSBot {summary['baseline_ms_per_move']:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
