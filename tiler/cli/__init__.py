"""The `tiler` command line: a thin layer that parses, calls one library function and renders.

Exit codes: 0 success; 2 bad input (one line on stderr naming the field and the allowed values); 1 internal
error (a bug: the traceback is kept). Program output (JSON/CSV) goes to stdout; progress and notes to stderr.
"""

from __future__ import annotations

import sys

import click

from ..errors import TilerError, one_line

# the command modules register their commands on the group when imported
from . import batch, catalogue, fitting, libraries, tilings  # noqa: F401
from .base import cli
from .batch import sweep_command, sweep_main


def _version_everywhere() -> None:
    """`--version` on every subcommand too (`tiler search --version`), not only on the group."""
    for command in cli.commands.values():
        if not any(p.name == "version" for p in command.params):
            click.version_option(package_name="tiler")(command)


_version_everywhere()


def _as_flag(message: str, args: list[str]) -> str:
    """Library errors name their parameter (`trials: ...`); on the command line that is a flag (`--trials: ...`).
    Only the options of the command that ran are renamed; problem fields and other names stay as they are."""
    command = next((a for a in args if a in cli.commands), None)
    head, sep, rest = message.partition(":")
    word = head.split(" ")[0]
    if command is None or not sep:
        return message
    for param in cli.commands[command].params:
        named = param.name == word or f"--{word}" in param.opts  # `export:` for --export (export_path)
        if isinstance(param, click.Option) and named and param.opts[0].startswith("--"):
            return param.opts[0] + head[len(word) :] + sep + rest
    return message


def main(argv=None) -> int:
    """Entry point: turns input errors into one stderr line and exit code 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        rv = cli.main(args=args, prog_name="tiler", standalone_mode=False)
    except (
        SystemExit
    ) as exc:  # a command that sets its own exit code (sweep: 1 when rows failed, 130 on Ctrl-C)
        return exc.code if isinstance(exc.code, int) else 1
    except TilerError as exc:
        if debug:
            raise
        click.echo(f"error: {one_line(_as_flag(str(exc), args))}", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        if debug:
            raise
        click.echo(f"error: {one_line(exc.format_message())}", err=True)
        return 2
    return rv if isinstance(rv, int) else 0


__all__ = ["cli", "main", "sweep_command", "sweep_main"]
