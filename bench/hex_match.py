#!/usr/bin/env python3
"""Plays seriema-hex (over GTP) against OpenSpiel's MCTSBot, an MCTS written elsewhere.

The baseline is the textbook UCT of issue 23: one random rollout per simulation, UCT with
c = 1.4 on values in [-1, 1], the move by visit count, no solver. Colours alternate (seriema-hex
is black in even games). Every game is checked twice: OpenSpiel's returns and seriema-hex's
`final_score` must name the same winner, else the script stops with an error (the two programs'
boards or rules disagree). seriema-hex runs with --resign-threshold 0, so games end on the board.

    bench/hex_match.py --engine "build/games/hex/seriema-hex --quiet --rollouts 1000 --playouts 1" \
        --games 100 --simulations 1000 [--size 11] [--seed 1] [--goal 0.75] [--json out.json]

Prints one line per game and a summary (wins, win rate +- standard error, met/missed against
--goal, per-move median times of both sides); --json writes it.
Needs open_spiel (PyPI) in the Python that runs it: bench/run-hex-strength.sh makes a venv.
"""
import argparse
import sys
import time

import pyspiel

from hex_gtp import GtpEngine, median_ms, row_line, row_summary, write_json


def baseline_bot(game, simulations, uct_c, rollouts, seed):
    # OpenSpiel's C++ MCTSBot (the Python one is some 30 times slower): UCT, no solver.
    evaluator = pyspiel.RandomRolloutEvaluator(rollouts, seed)
    return pyspiel.MCTSBot(game, evaluator, uct_c, simulations, 1000, False, seed, False)


def engine_move(engine, state, colour):
    """Asks seriema-hex for a move and plays it on OpenSpiel's board; returns its name."""
    name = engine.ask(f"genmove {colour}").lower()
    if name == "resign":
        raise RuntimeError("seriema-hex resigned, although started with --resign-threshold 0")
    by_name = {state.action_to_string(state.current_player(), a): a
               for a in state.legal_actions()}
    if name not in by_name:
        raise RuntimeError(f"seriema-hex played {name!r}, not a legal move here")
    state.apply_action(by_name[name])
    return name


def bot_move(bot, engine, state, colour):
    """Plays MCTSBot's move on OpenSpiel's board and tells seriema-hex; returns its name."""
    action = bot.step(state)
    name = state.action_to_string(state.current_player(), action)
    state.apply_action(action)
    engine.ask(f"play {colour} {name}")
    return name


def check_winner(engine, state, moves):
    """OpenSpiel's winner and seriema-hex's final_score must agree; returns black_won."""
    black_won = state.returns()[0] > 0
    score = engine.ask("final_score")
    if score[:1].upper() != ("B" if black_won else "W"):
        raise RuntimeError(f"OpenSpiel says {'black' if black_won else 'white'} won, "
                           f"seriema-hex says {score!r}: {' '.join(moves)}")
    return black_won


def play_one(game, engine, bot, engine_black, size):
    """Returns (engine_won, engine_seconds_per_move list, bot_seconds_per_move list, moves)."""
    state = game.new_initial_state()
    engine.new_game(size)
    times = {True: [], False: []}  # keyed by "seriema-hex moved"
    moves = []
    while not state.is_terminal():
        black_to_move = state.current_player() == 0
        colour = "b" if black_to_move else "w"
        engine_to_move = black_to_move == engine_black
        start = time.perf_counter()
        if engine_to_move:
            moves.append(engine_move(engine, state, colour))
        else:
            moves.append(bot_move(bot, engine, state, colour))
        times[engine_to_move].append(time.perf_counter() - start)
    black_won = check_winner(engine, state, moves)
    return black_won == engine_black, times[True], times[False], moves


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", required=True, help="seriema-hex command line (without gtp)")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--size", type=int, default=11)
    parser.add_argument("--simulations", type=int, default=1000, help="MCTSBot simulations")
    parser.add_argument("--uct-c", type=float, default=1.4)
    parser.add_argument("--rollouts", type=int, default=1, help="MCTSBot rollouts per simulation")
    parser.add_argument("--seed", type=int, default=1, help="MCTSBot's random seed")
    parser.add_argument("--label", default="", help="names this row in the output")
    parser.add_argument("--goal", type=float, help="the minimum win rate this row must reach")
    parser.add_argument("--json", help="write the summary here")
    return parser.parse_args()


def play_games(args, game, bot, engine):
    """Plays the row's games, colours alternated; returns (wins, engine times, bot times)."""
    wins, engine_times, bot_times = 0, [], []
    for i in range(args.games):
        engine_black = i % 2 == 0
        won, e_times, b_times, moves = play_one(game, engine, bot, engine_black, args.size)
        wins += won
        engine_times += e_times
        bot_times += b_times
        print(f"game {i + 1}: seriema-hex {'black' if engine_black else 'white'} "
              f"{'won' if won else 'lost'} in {len(moves)} moves ({wins}/{i + 1})", flush=True)
    return wins, engine_times, bot_times


def main():
    args = parse_args()
    game = pyspiel.load_game("hex", {"board_size": args.size})
    bot = baseline_bot(game, args.simulations, args.uct_c, args.rollouts, args.seed)
    engine = GtpEngine(args.engine)
    try:
        wins, engine_times, bot_times = play_games(args, game, bot, engine)
    finally:
        engine.close()
    summary = row_summary(
        args.label or args.engine, wins, args.games, args.goal, engine=args.engine,
        size=args.size, baseline={"simulations": args.simulations, "uct_c": args.uct_c,
                                  "rollouts": args.rollouts, "seed": args.seed},
        engine_ms_per_move=median_ms(engine_times), baseline_ms_per_move=median_ms(bot_times))
    print(f"{row_line(summary)} against MCTSBot ({args.simulations} simulations); median ms "
          f"per move: seriema-hex {summary['engine_ms_per_move']:.1f}, "
          f"MCTSBot {summary['baseline_ms_per_move']:.1f}")
    write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
