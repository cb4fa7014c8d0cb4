#!/usr/bin/env python3
"""Plays seriema-hex against MoHex 2.0 (benzene) over GTP, each game checked by OpenSpiel's Hex.

`play`: one row at T seconds and K threads a move for both sides. Colours alternate (seriema-hex
is black in even games), no swap. Every move is played on OpenSpiel's board too (an illegal or
resigning move stops the script), and after every move both programs' final_score must agree
with OpenSpiel: no winner while its game goes on (seriema-hex refuses final_score, MoHex answers
"cannot score"), then OpenSpiel's winner. seriema-hex runs with --resign-threshold 0; MoHex
resigns only in a finished game, so games end on the board.

    bench/hex_vs_mohex.py play --seriema "build/games/hex/seriema-hex --quiet --rollouts 0 \
        --seconds 1" --mohex /path/to/mohex --seconds 1 [--threads 1] [--games 20] [--size 11] \
        [--mohex-gtp "param_mohex ..."]... [--mohex-log FILE] [--label L] [--json out.json]

Prints one line per game and seriema-hex's wins, win rate +- standard error and both sides'
median and 90th-percentile ms per move (decided positions take no search: the 90th percentile
is a searched move's); --json writes them. seriema-hex's threads are the caller's business
(SERIEMA_THREADS, bench/run-hex-vs-mohex.sh sets it); --threads sets MoHex's.

`report`: the rows of several `play` runs (their JSON files) as a table, in one JSON list
(--json) and, given --plot, as a plot of the win rate against the time per move.

    bench/hex_vs_mohex.py report [--json all.json] [--plot rate.png] ROW.json...

`play` needs open_spiel (bench/run-hex-vs-mohex.sh makes the venv), `report --plot` matplotlib.
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
import time

from hex_gtp import GtpEngine, median_ms, row_line, row_summary, write_json


def mohex_settings(seconds, threads, size):
    """MoHex's GTP settings for a fixed T seconds a move on K threads (checked in its sources,
    src/mohex/MoHexEngine.cpp and src/hex/HexHtpEngine.cpp of benzene-vanilla-cmake).

    No opening book is ever opened (book-open is never sent; BookCheck plays none without one)."""
    # The fill-in cache (2^bits entries, default 16) is copied about three times a move, some
    # 0.35 s at 16 bits, whatever the time per move; when full MoHex aborts. Size it for ~200
    # knowledge states a second a thread (measured: under 100) plus the states it keeps.
    bits = min(16, max(12, math.ceil(math.log2(200 * seconds * threads + 1000))))
    return [
        f"boardsize {size}",
        "param_game allow_swap 0",                      # no swap (the default)
        f"param_mohex num_threads {threads}",
        *(["param_mohex lock_free 1"] if threads > 1 else []),  # else one lock for the tree
        "param_mohex ponder 0",                         # no search in the opponent's time
        "param_mohex use_parallel_solver 0",            # no DFPN solver beside the search
        "param_mohex use_time_management 0",            # every move gets max_time ...
        f"param_mohex max_time {seconds:g}",
        "param_mohex extend_unstable_search 0",         # ... and never 1.5 x max_time
        f"param_mohex fillin_map_bits {bits}",
    ]


def verdict(engine):
    """None while the program says the game goes on, else 'B' or 'W'."""
    over, score = engine.try_ask("final_score")
    if over and score[:2].upper() in ("B+", "W+"):
        return score[:1].upper()
    if "not over" not in score and "cannot score" not in score:
        raise RuntimeError(f"{engine.name}: unexpected final_score answer: {score!r}")
    return None


def play_move(engine, state, colour):
    """Asks the program for a move and plays it on OpenSpiel's board; returns its name."""
    name = engine.ask(f"genmove {colour}").lower()
    by_name = {state.action_to_string(state.current_player(), a): a
               for a in state.legal_actions()}
    if name not in by_name:
        raise RuntimeError(f"{engine.name} played {name!r}, not a legal move here")
    state.apply_action(by_name[name])
    return name


def play_one(game, engines, seriema_black, size, times):
    """One game from the empty board; returns (seriema-hex won, moves). Appends each move's
    seconds to times[side]."""
    state = game.new_initial_state()
    for engine in engines.values():
        engine.new_game(size)
    moves = []
    while not state.is_terminal():
        black_to_move = state.current_player() == 0
        colour = "b" if black_to_move else "w"
        mover = "seriema" if black_to_move == seriema_black else "mohex"
        other = "mohex" if mover == "seriema" else "seriema"
        start = time.perf_counter()
        try:
            moves.append(play_move(engines[mover], state, colour))
        except RuntimeError as error:
            raise RuntimeError(f"{error}; the game so far: {' '.join(moves)}") from error
        times[mover].append(time.perf_counter() - start)
        engines[other].ask(f"play {colour} {moves[-1]}")
        expected = None if not state.is_terminal() else ("B" if state.returns()[0] > 0 else "W")
        for engine in engines.values():
            said = verdict(engine)
            if said != expected:
                raise RuntimeError(f"OpenSpiel says {expected or 'not over'}, {engine.name} "
                                   f"says {said or 'not over'} after {' '.join(moves)}")
    black_won = state.returns()[0] > 0
    return black_won == seriema_black, moves


def cmd_play(args):
    import pyspiel  # only here: `report` runs without open_spiel

    game = pyspiel.load_game("hex", {"board_size": args.size})
    settings = mohex_settings(args.seconds, args.threads, args.size) + args.mohex_gtp
    log = open(args.mohex_log, "w") if args.mohex_log else subprocess.DEVNULL
    engines = {"seriema": GtpEngine(args.seriema)}
    # MoHex writes default.log into its working directory unless told not to; its search log
    # goes to stderr (the --mohex-log file) either way.
    engines["mohex"] = GtpEngine(args.mohex, gtp_args=("--use-logfile=false",), name="mohex",
                                 stderr=log)
    wins, times, played = 0, {"seriema": [], "mohex": []}, []
    try:
        for line in settings:
            engines["mohex"].ask(line)
        for i in range(args.games):
            seriema_black = i % 2 == 0
            won, moves = play_one(game, engines, seriema_black, args.size, times)
            wins += won
            played.append({"seriema_black": seriema_black, "seriema_won": won,
                           "moves": " ".join(moves)})
            print(f"game {i + 1}: seriema-hex {'black' if seriema_black else 'white'} "
                  f"{'won' if won else 'lost'} in {len(moves)} moves ({wins}/{i + 1})",
                  flush=True)
    finally:
        for engine in engines.values():
            engine.close()
        if log is not subprocess.DEVNULL:
            log.close()
    summary = row_summary(
        args.label or f"{args.seconds:g}s", wins, args.games, None, seconds=args.seconds,
        threads=args.threads, size=args.size, seriema=args.seriema, mohex=args.mohex,
        mohex_gtp=settings, seriema_ms_per_move=median_ms(times["seriema"]),
        mohex_ms_per_move=median_ms(times["mohex"]),
        seriema_p90_ms_per_move=p90_ms(times["seriema"]),
        mohex_p90_ms_per_move=p90_ms(times["mohex"]),
        seriema_max_ms_per_move=1000 * max(times["seriema"], default=0),
        mohex_max_ms_per_move=1000 * max(times["mohex"], default=0),
        rules_check=f"open_spiel {version('open_spiel')} hex", games_played=played)
    # Moves in decided positions take no search (both programs see the win), so the median
    # falls in long games; the 90th percentile is the time of a searched move.
    print(f"{row_line(summary)} (seriema-hex won against MoHex, {args.seconds:g} s a move, "
          f"{args.threads} thread(s)); ms per move, median / 90th percentile: seriema-hex "
          f"{summary['seriema_ms_per_move']:.1f} / {summary['seriema_p90_ms_per_move']:.1f}, "
          f"MoHex {summary['mohex_ms_per_move']:.1f} / {summary['mohex_p90_ms_per_move']:.1f}")
    write_json(args.json, summary)
    return 0


def p90_ms(seconds):
    if len(seconds) < 2:
        return median_ms(seconds)
    return 1000 * statistics.quantiles(seconds, n=10)[-1]


def version(package):
    try:
        import importlib.metadata
        return importlib.metadata.version(package)
    except Exception:  # noqa: BLE001 (only a label)
        return "?"


def cmd_report(args):
    rows = []
    for path in args.rows:
        with open(path) as f:
            rows.append(json.load(f))
    rows.sort(key=lambda r: (r["threads"], r["seconds"]))
    lines = ["| s a move | threads | seriema-hex wins | win rate ± SE | ms a move, median / "
             "90th percentile: seriema-hex | MoHex |", "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['seconds']:g} | {r['threads']} | {r['wins']}/{r['games']} | "
                     f"{r['win_rate']:.3f} ± {r['standard_error']:.3f} | "
                     f"{r['seriema_ms_per_move']:.0f} / {r['seriema_p90_ms_per_move']:.0f} | "
                     f"{r['mohex_ms_per_move']:.0f} / {r['mohex_p90_ms_per_move']:.0f} |")
    print("\n".join(lines))
    write_json(args.json, rows)
    if args.plot:
        plot(rows, args.plot)
    return 0


def plot(rows, path):
    """Win rate (± SE) against seconds a move, one line per thread count; as plot_hex_strength.py
    draws its budget plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    seconds = sorted({r["seconds"] for r in rows})
    for threads in sorted({r["threads"] for r in rows}):
        own = [r for r in rows if r["threads"] == threads]
        ax.errorbar([r["seconds"] for r in own], [r["win_rate"] for r in own],
                    yerr=[r["standard_error"] for r in own], marker="o", capsize=4,
                    label=f"seriema-hex, {threads} thread(s) a side")
    ax.axhline(0.5, color="grey", linestyle=":", label="even")
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(seconds)
    ax.set_xticklabels([f"{s:g}" for s in seconds])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(f"seconds per move, each side ({rows[0]['size']}x{rows[0]['size']})")
    ax.set_ylabel("win rate against MoHex 2.0 (± SE)")
    ax.set_title("Hex: seriema-hex against MoHex at equal time per move")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    play = sub.add_parser("play", help="play one row")
    play.add_argument("--seriema", required=True,
                      help="seriema-hex command line (without gtp), its time budget included")
    play.add_argument("--mohex", required=True, help="MoHex command line")
    play.add_argument("--seconds", type=float, required=True, help="MoHex's max_time")
    play.add_argument("--threads", type=int, default=1, help="MoHex's num_threads")
    play.add_argument("--games", type=int, default=20)
    play.add_argument("--size", type=int, default=11)
    play.add_argument("--mohex-gtp", action="append", default=[],
                      help="one more GTP command for MoHex after the settings (repeatable)")
    play.add_argument("--mohex-log", help="MoHex's stderr (its search logs) goes here")
    play.add_argument("--label", default="", help="names this row in the output")
    play.add_argument("--json", help="write the summary here")
    report = sub.add_parser("report", help="table, JSON list and plot of several rows")
    report.add_argument("rows", nargs="+", help="JSON files written by play --json")
    report.add_argument("--json", help="write all rows here, as one list")
    report.add_argument("--plot", help="write the plot (PNG) here")
    return parser.parse_args()


def main():
    args = parse_args()
    return cmd_play(args) if args.command == "play" else cmd_report(args)


if __name__ == "__main__":
    sys.exit(main())
