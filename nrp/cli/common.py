"""What every ``nrp`` sub-command shares: the --indexes and executor options, progress (lines,
and bars with the time left on a terminal) and executor reports on stderr, reading an answer
set, and the one-line error a library error becomes.

Kept in one place so that each option reads and behaves the same in every command that takes it.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal

from nrp import api, engine
from nrp.errors import MESSAGE_LIMIT, NrpError, NrpWarning, one_line


def add_indexes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--indexes",
        metavar="DIR",
        default=None,
        help="folder of built collections and caches (default: $NRP_INDEXES or ./indexes)",
    )


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where work runs: local (this process, default) or ray (a Ray cluster: per-query "
        "partitions on actors, results written here)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="Ray cluster address (host:port or auto; default: $RAY_ADDRESS, else a Ray "
        "instance started on this machine)",
    )


def open_executor(args: argparse.Namespace) -> AbstractContextManager[Any]:
    """The executor the options name, as a context manager (None for local)."""
    executor = api.make_executor(args.executor, args.ray_address)
    return nullcontext() if executor is None else executor


def report_executor(executor: object) -> None:
    """One stderr line per executor run: partitions, workers, time, re-sent and lost."""
    for stats in getattr(executor, "history", []):
        print(f"{stats.executor}: {stats.task}: {stats.partitions} partition(s) on "
              f"{len(stats.workers)} worker(s) in {stats.wall_seconds:.1f} s; "
              f"{stats.resubmitted} re-sent, {stats.workers_lost} worker(s) lost",
              file=sys.stderr)  # fmt: skip


def add_query_map_options(parser: argparse.ArgumentParser) -> None:
    """--query-map / --collection: the qids of a Label Studio export's query texts."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--query-map",
        type=Path,
        metavar="FILE",
        help="a Label Studio export's query texts -> qids: a CSV/TSV/JSONL file with columns "
        "qid and query",
    )
    group.add_argument(
        "--collection",
        metavar="NAME",
        help="a Label Studio export's query texts -> qids: the topics of this built collection",
    )
    add_indexes_option(parser)


def query_map(args: argparse.Namespace) -> Any:
    """The query map the options name (a file path or a collection's topics), or None."""
    if args.collection:
        topics = api.Collection.load(args.collection, args.indexes).topics
        return engine.QueryMap.from_frame(topics, f"the topics of collection {args.collection}")
    return args.query_map


#: the running command's progress (``run_command`` sets it and closes its bars)
_progress: Callable[[str], None] | None = None


def print_progress(line: str) -> None:
    """The ``progress`` callback of every long command: one line on stderr and, on a terminal,
    a bar per counted step with its rate and time left (``nrp.progress``); with --quiet
    nothing."""
    if _progress is None:  # a handler called without run_command: the plain line
        print(line, file=sys.stderr)
    else:
        _progress(line)


def _no_progress(line: str) -> None:
    """--quiet: progress lines dropped."""


def read_answer_set(path: Path, collection: object, skip_invalid: bool) -> Any:
    """The answer set at ``path`` read against the collection; skipped rows listed on stderr."""
    answer_set = api.read_answers(path, collection, skip_invalid=skip_invalid)
    print_read_notes(answer_set)
    return answer_set


def print_read_notes(answer_set: Any) -> None:
    """The report layouts read and the rows skipped, on stderr."""
    for line in [*answer_set.layout_lines(), answer_set.empty_line()]:
        if line:
            print(line, file=sys.stderr)
    for row in answer_set.skipped:
        print(f"skipped: {row}", file=sys.stderr)
    if answer_set.skipped:
        print(f"skipped {len(answer_set.skipped)} invalid answer(s)", file=sys.stderr)


def read_answer_blocks(path: Path, collection: object, skip_invalid: bool) -> Any:
    """``read_answer_set`` a block at a time where that holds less (``engine.read_answer_blocks``);
    skipped rows listed on stderr."""
    blocks = engine.read_answer_blocks(path, collection, skip_invalid=skip_invalid)
    if blocks.whole is not None:
        print_read_notes(blocks.whole)
    return blocks


def check_out(path: Path | None, kind: Literal["folder", "file"] = "folder") -> None:
    """An ``--out`` that cannot be written is a one-line error before any work is done: a folder
    that exists as a file (or lies under a file), a file that exists as a folder."""
    if path is None:
        return
    if kind == "folder" and path.exists() and not path.is_dir():
        raise NrpError(f"--out {path}: exists and is not a folder")
    if kind == "file" and path.is_dir():
        raise NrpError(f"--out {path}: is a folder; give a file name")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise NrpError(f"--out {path}: {parent} is a file, not a folder")
            return


#: how an error about a path itself begins (after ``PATH: ``): the fix is another path, so the
#: message says which argument gave it; an error about the file's content is fixed in the file
PATH_PROBLEMS = (
    "file not found",
    "file or folder not found",
    "folder not found",
    "manifest not found",
    "is a folder",
    "folder is not empty",
)


def _given_as(message: str, args: argparse.Namespace) -> str:
    """`` (given as --runs)`` or `` (the ANSWERS argument)`` when ``message`` is about a file
    the user gave as a path argument (not found, not a folder, in the way), so the error says
    which argument to change (``PATH_PROBLEMS``); nothing for an error about its content."""
    for dest, shown in getattr(args, "path_options", {}).items():
        value = getattr(args, dest, None)
        for path in value if isinstance(value, list) else [value]:
            head = f"{path}: "
            about_the_path = message[len(head) :].startswith(PATH_PROBLEMS)
            if path is not None and message.startswith(head) and about_the_path:
                return (
                    f" (given as {shown})" if shown.startswith("-") else f" (the {shown} argument)"
                )
    return ""


#: the exit status when the reader of standard output went away: 128 + SIGPIPE, what a shell
#: reports for a tool that signal ended
STDOUT_CLOSED = 141


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe or socket nobody reads any more (poll reports an error
    on it), as opposed to another pipe of the command (a worker's) that broke."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no fileno (captured) or no poll
        return False


def _silence_stdout() -> None:
    """Point standard output at the null device, so that what is still buffered in it is
    dropped at exit instead of raising again there."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    finally:
        os.close(null)


def _os_error(err: OSError) -> int:
    """A file that could not be read or written, as one line (a name too long to open is quoted
    in part); exit 2."""
    where = f"{one_line(err.filename)}: " if err.filename else ""
    print(f"nrp: error: {where}{one_line(err.strerror or err)}", file=sys.stderr)
    return 2


class Terminated(BaseException):
    """SIGTERM received: raised where the command is, so that what it writes aside is removed
    on the way out (as for Ctrl-C), instead of the process ending with partial files left."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


def _on_sigterm() -> Any:
    """Turn SIGTERM into ``Terminated`` while a command runs (main thread only); the handler
    it replaced, to restore, or None where none was installed."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is None:  # a handler not of Python's: left alone
        return None
    return signal.signal(signal.SIGTERM, _terminate)


def _skip_hint(error: NrpError, args: argparse.Namespace) -> str:
    """For an answer record that cannot be read, under a command that can leave such records
    out: how (``--skip-invalid``); '' otherwise."""
    if isinstance(error, engine.InvalidAnswer) and getattr(args, "skip_invalid", None) is False:
        return " (--skip-invalid leaves such rows out, and lists them)"
    return ""


def run_command(args: argparse.Namespace) -> int:
    """Run the sub-command ``args`` names; a library error is one line on stderr and exit 2
    (argparse's code for a usage error), and so is a file that cannot be read or written (no
    permission, a name too long, a full disk); an interrupt exits 130. When whatever reads
    standard output stops reading (``nrp check ... | head``), the command stops quietly with
    exit 141, as a Unix tool ended by SIGPIPE does: that is the reader's choice, not an error."""
    global _progress
    lines = None if getattr(args, "quiet", False) else engine.ProgressLines()
    _progress = lines or _no_progress
    previous = _on_sigterm()
    try:
        with warnings.catch_warnings():  # the command prints what these say, in its tables
            warnings.simplefilter("ignore", NrpWarning)
            code = args.run(args)
        sys.stdout.flush()  # so that a reader gone away is met below, not at exit
        return code
    except BrokenPipeError as err:
        if not _stdout_reader_gone():  # a pipe of the command's own: an error like any other
            return _os_error(err)
        _silence_stdout()
        return STDOUT_CLOSED
    except NrpError as err:  # one line, however long the values it was built from
        message = one_line(err, MESSAGE_LIMIT)
        print(f"nrp: error: {message}{_given_as(str(err), args)}{_skip_hint(err, args)}",
              file=sys.stderr)  # fmt: skip
        return 2
    except OSError as err:
        return _os_error(err)
    except KeyboardInterrupt:
        print("nrp: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("nrp: terminated (SIGTERM); nothing half-written was left", file=sys.stderr)
        return 143
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if lines is not None:
            lines.close()
        _progress = None
