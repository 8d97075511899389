"""``trio-agent fleet``: run a JSONL file of tasks to completion, locally or on Ray.

Each task gets a transcript under ``OUT/transcripts/`` and a line in
``OUT/results.jsonl``; running the same command again skips finished tasks and resumes
interrupted ones (``--retry-failed``: failed ones too). A task whose run left calls
waiting for approval is recorded ``deferred`` (the waiting call ids in its result
line); ``--decisions FILE.jsonl`` answers them and resumes those tasks from their
transcripts. ``--demo`` runs 1,000 scripted
tasks offline (no key, no network). The factory module is imported with the current
folder first on ``sys.path``, as ``python -m`` does; with ``--ray`` the actors append
the same folder to theirs, and take a relative ``--out`` from it.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from functools import partial
from typing import Any, Literal

import trio

from ._common import cancelled_by_ctrl_c

__all__ = ["add_arguments", "run"]

DEFAULT_CONCURRENCY = 64
DEFAULT_ACTORS = 2
DEFAULT_RAY_TIMEOUT = 60.0
DEFAULT_DEMO_TASKS = 1_000
DEFAULT_DEMO_SLEEP = 0.01
FSYNC_MODES: dict[str, bool | Literal["turn"]] = {"turn": "turn", "always": True, "never": False}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run every task of a JSONL file (one {id, prompt, messages, metadata} object per "
        "line) to its end: one JSONL transcript per task under OUT/transcripts/ and one "
        "line per task in OUT/results.jsonl. Run the same command again to resume: "
        "finished tasks are skipped, interrupted ones continue from their transcripts; "
        "failed ones (reason failed, error or timeout) are skipped too unless "
        "--retry-failed. One fleet at a time per OUT: the folder is locked "
        "(OUT/fleet.lock holds the pid), and a second one exits 1 naming that pid."
    )
    parser.epilog = (
        "The factory is a function taking a trio_agent.fleet.FleetTask and returning a "
        "trio_agent.fleet.TaskSetup (model, tools, system prompt, config); it is imported "
        "(with the current folder first on the module path, as python -m does) and "
        "called on the worker that runs the task; with --ray each actor imports it, "
        "with the current folder last on its module path (on a remote cluster the "
        "module must be importable on the workers), and a relative OUT is taken from "
        "the current folder. If a transcript or results.jsonl "
        "cannot be written (too many open files, a full disk), no new task starts, the "
        "running ones finish, and the command exits 1 with the cause: the task that hit "
        "it is not recorded, and running the command again resumes it. Exit codes: 0 "
        "every task of TASKS.jsonl is recorded in results.jsonl without failure; 1 "
        "results.jsonl records a failed task (failed, error or timeout; from this run or "
        "an earlier one: rerun with --retry-failed), or the fleet could not go on (its "
        "storage failed, another fleet holds OUT); 2 bad usage (unreadable tasks, a bad "
        "or unimportable factory, decisions that do not answer a deferred task's waiting "
        "calls exactly); 130 interrupted by Ctrl-C (rerun the command to resume). A "
        "deferred task (calls wait for approval) is no failure: its results.jsonl line "
        "lists the waiting calls under 'deferred', and --decisions FILE.jsonl, one "
        '{"task": ID, "call": CALL_ID, "decision": "approve"|"deny"|"result"} per line '
        '(with "reason" for deny, "content" for result), resumes it.'
    )
    parser.add_argument("tasks", metavar="TASKS.jsonl", nargs="?", help="the tasks file")
    parser.add_argument(
        "--factory", metavar="MODULE:FUNCTION", help="builds each task's model and tools"
    )
    parser.add_argument(
        "--out", metavar="DIR", help="output folder (--demo default: a new temporary folder)"
    )
    parser.add_argument(
        "--concurrency",
        metavar="K",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"runs at once, locally; with --ray, per actor (default {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run on the Ray cluster at ADDRESS ('auto': the local `ray start` one; "
        "needs pip install 'trio-agent[ray]')",
    )
    parser.add_argument(
        "--ray-timeout",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_RAY_TIMEOUT,
        help="with --ray: how long to wait for the cluster to answer; then exit 1 with "
        f"an error, having run nothing (default {DEFAULT_RAY_TIMEOUT:g}; Ctrl-C also ends "
        "the wait)",
    )
    parser.add_argument(
        "--actors",
        metavar="N",
        type=int,
        default=DEFAULT_ACTORS,
        help=f"Ray actors, one trio loop each (default {DEFAULT_ACTORS})",
    )
    parser.add_argument(
        "--task-timeout",
        metavar="SECONDS",
        type=float,
        default=None,
        help="end a task that takes longer than this (factory and run) with reason "
        "timeout: its transcript is paired and kept, it counts as failed, and "
        "--retry-failed continues it (default: no limit)",
    )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="run the tasks recorded failed (failed, error, timeout) again, continuing "
        "from their transcripts where they exist; each gets a new line in results.jsonl",
    )
    parser.add_argument(
        "--decisions",
        metavar="FILE.jsonl",
        help="answer the calls that deferred tasks wait for (one JSON object per line: "
        "task, call, decision approve|deny|result, and reason or content) and resume "
        "those tasks; checked before anything runs",
    )
    parser.add_argument(
        "--fsync",
        choices=sorted(FSYNC_MODES),
        default="turn",
        help="when transcripts are fsynced: at each turn's end (default), after every "
        "message, or never (survives a process crash, not a machine crash)",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help=f"run {DEFAULT_DEMO_TASKS:,} scripted tasks offline instead of a tasks file",
    )
    parser.add_argument(
        "--demo-tasks",
        metavar="N",
        type=int,
        default=DEFAULT_DEMO_TASKS,
        help=f"how many demo tasks (default {DEFAULT_DEMO_TASKS:,})",
    )
    parser.add_argument(
        "--demo-sleep",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_DEMO_SLEEP,
        help=f"how long each demo task's tool sleeps (default {DEFAULT_DEMO_SLEEP})",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show the progress line (default: when stderr is a terminal)",
    )


def _usage(message: str) -> int:
    print(f"trio-agent fleet: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from ..fleet import (
        FleetError,
        RayBackend,
        demo_factory,
        demo_tasks,
        load_decisions,
        load_tasks,
        run_fleet,
    )
    from ..fleet._ray import import_ray
    from ..fleet._worker import resolve_factory

    if args.concurrency < 1 or args.actors < 1:
        return _usage("--concurrency and --actors must be at least 1")
    if not args.ray_timeout > 0:  # NaN too
        return _usage("--ray-timeout must be a number of seconds above 0")
    timeout = args.task_timeout
    if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
        return _usage("--task-timeout must be a number of seconds above zero")
    tasks: Any
    if args.demo:
        if args.tasks or args.factory:
            return _usage("--demo runs its own tasks: give no TASKS.jsonl and no --factory")
        if args.demo_tasks < 1 or args.demo_sleep < 0:
            return _usage("--demo-tasks must be at least 1 and --demo-sleep not negative")
        tasks = demo_tasks(args.demo_tasks, sleep=args.demo_sleep)
        factory: Any = demo_factory
        out = args.out or tempfile.mkdtemp(prefix="trio-agent-fleet-demo-")
    else:
        if not args.tasks or not args.factory or not args.out:
            return _usage("give TASKS.jsonl, --factory MODULE:FUNCTION and --out DIR (or --demo)")
        try:
            tasks = load_tasks(args.tasks)
        except (OSError, ValueError) as exc:
            return _usage(f"cannot read the tasks: {exc}")
        factory = args.factory
        _import_from_the_current_folder()
        try:
            resolve_factory(factory)
        except (ImportError, ValueError) as exc:
            return _usage(f"bad --factory: {exc}")
        out = args.out
    decisions = None
    if args.decisions is not None:
        try:
            decisions = load_decisions(args.decisions)
        except (OSError, ValueError) as exc:
            return _usage(f"cannot read the decisions: {exc}")
    backend = None
    if args.ray is not None:
        try:
            import_ray()  # so that an ImportError of the fleet is the factory's
        except ImportError as exc:
            print(f"trio-agent fleet: {exc}", file=sys.stderr)
            return 1
        backend = RayBackend(
            address=args.ray,
            actors=args.actors,
            runs_per_actor=args.concurrency,
            connect_timeout=args.ray_timeout,
        )
    fleet = partial(
        run_fleet,
        tasks,
        factory,
        out=out,
        concurrency=args.concurrency,
        backend=backend,
        fsync=FSYNC_MODES[args.fsync],
        progress=args.progress,
        task_timeout=timeout,
        retry_failed=args.retry_failed,
        timings=True,
        decisions=decisions,
    )
    try:
        summary = trio.run(cancelled_by_ctrl_c, fleet)
    except (FleetError, OSError) as exc:
        print(f"trio-agent fleet: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:  # the Ray workers could not import the factory
        return _usage(f"bad --factory: {exc}")
    except ValueError as exc:
        return _usage(str(exc))
    retried = f", {summary.retried:,} retried" if summary.retried else ""
    cost = "" if summary.cost is None else f"${summary.cost:.4f}; "
    print(
        f"{summary.total:,} tasks: {summary.done:,} done now ({summary.failed:,} failed, "
        f"{summary.resumed:,} resumed{retried}), {summary.skipped:,} done before; "
        f"{summary.usage.total:,} tokens; {cost}{summary.wall_time:.1f} s"
    )
    print(f"results: {summary.results_path}")
    if summary.deferred:
        print(
            f"{summary.deferred:,} task(s) wait for decisions on their calls (reason "
            "deferred in results.jsonl): answer them with --decisions FILE.jsonl"
        )
    if summary.still_failed:
        print(
            f"trio-agent fleet: {summary.still_failed:,} task(s) recorded failed in "
            f"{summary.results_path}; run again with --retry-failed to retry them",
            file=sys.stderr,
        )
        return 1
    return 0


def _import_from_the_current_folder() -> None:
    """Put the current folder first on ``sys.path``, as ``python -m`` does, so that
    ``--factory mymodule:build`` finds ``./mymodule.py`` (the ``trio-agent`` script's
    own folder is what Python puts there otherwise)."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)
