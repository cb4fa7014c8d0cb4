"""Shared by the Hex strength scripts: a seriema-hex GTP engine and the report of one row.

hex_match.py (against OpenSpiel's MCTSBot), hex_head_to_head.py (two seriema-hex command lines),
hex_rules_check.py (random games in both rule implementations) and hex_vs_mohex.py (against
MoHex, another GTP program: GtpEngine's gtp_args, name and stderr) use it; it needs no
open_spiel, so head-to-head games run with any python3.
"""
import json
import math
import shlex
import statistics
import subprocess


class GtpEngine:
    """One seriema-hex gtp process (or a seriema-run job running one); each answer is checked.

    The command line is split with shlex, so "build/tools/seriema-run -n 2 -- seriema-hex ..."
    is one engine whose rank 0 reads GTP on its stdin. Resigning is off (--resign-threshold 0):
    every game is played to its end, so that both sides' boards can name the winner.

    Another GTP program: gtp_args=() (what follows the command line; seriema-hex's by default),
    name (in error messages) and stderr (a file, or subprocess.DEVNULL; inherited by default)."""

    SERIEMA_GTP_ARGS = ("gtp", "--resign-threshold", "0")

    def __init__(self, command, gtp_args=SERIEMA_GTP_ARGS, name="seriema-hex", stderr=None):
        self.command = command
        self.name = name
        self.proc = subprocess.Popen(shlex.split(command) + list(gtp_args),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1, stderr=stderr)

    def ask(self, line):
        """The answer to one command, without its '=' (RuntimeError on a '?' answer)."""
        ok, answer = self.try_ask(line)
        if not ok:
            raise RuntimeError(f"{self.name} refused {line!r}: {answer}")
        return answer

    def try_ask(self, line):
        """(True, answer) or (False, error text): for commands whose refusal is expected."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = "\n".join(self._answer_lines(line))
        return answer.startswith("="), answer[1:].strip()

    def _answer_lines(self, line):
        """Lines up to the empty line that ends a GTP answer."""
        lines = []
        while True:
            got = self.proc.stdout.readline()
            if got == "":
                raise RuntimeError(f"{self.name} exited while answering {line!r}")
            got = got.rstrip("\n")
            if got == "" and lines:
                return lines
            if got != "" or lines:
                lines.append(got)

    def new_game(self, size):
        self.ask(f"boardsize {size}")
        self.ask("clear_board")

    def close(self):
        if self.proc.poll() is not None:  # exited already (its error is being reported)
            return
        try:
            self.ask("quit")
        finally:
            self.proc.wait(timeout=60)


def standard_error(wins, games):
    """sqrt(p(1 - p) / n) of a win rate p over n games."""
    rate = wins / games
    return math.sqrt(rate * (1 - rate) / games)


def median_ms(seconds):
    return 1000 * statistics.median(seconds) if seconds else 0.0


def row_summary(label, wins, games, goal, **details):
    """One benchmark row: wins, rate, standard error, the goal (a minimum rate) and met/missed."""
    rate = wins / games
    return {"label": label, "games": games, "wins": wins, "win_rate": rate,
            "standard_error": standard_error(wins, games), "goal": goal,
            "met": goal is None or rate >= goal, **details}


def row_line(summary):
    """The row as one printed line: 'label: wins/games = rate +- se (goal g: met)'."""
    line = (f"{summary['label']}: {summary['wins']}/{summary['games']} = "
            f"{summary['win_rate']:.3f} +- {summary['standard_error']:.3f}")
    if summary["goal"] is not None:
        line += f" (goal {summary['goal']:.2f}: {'met' if summary['met'] else 'missed'})"
    return line


def write_json(path, summary):
    if path:
        with open(path, "w") as f:
            json.dump(summary, f, indent=2)
