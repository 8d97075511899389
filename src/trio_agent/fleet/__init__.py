"""Fleets of runs: a set of tasks run to completion, on one machine or on a Ray cluster.

::

    from trio_agent.fleet import run_fleet

    summary = await run_fleet("tasks.jsonl", "myapp.agents:build", out="runs/eval-1")

Each task gets a JSONL transcript under ``out/transcripts/`` and one line in
``out/results.jsonl``; running the same fleet again skips finished tasks and resumes
interrupted ones (``retry_failed=True`` runs the failed ones again). One fleet at a time
per output folder (``out/fleet.lock``). ``task_timeout`` bounds each task (reason
``timeout``). When the fleet's own files cannot be written (a full disk, too many open
files) it stops with :class:`StorageError`, leaving the task unrecorded for the next run.
``backend=RayBackend(...)`` spreads the tasks over a Ray cluster
(``pip install 'trio-agent[ray]'``; Ray is imported only when that backend runs).
The implementation lives in private modules; this module re-exports the public names.
"""

from ._demo import demo_factory as demo_factory
from ._demo import demo_tasks as demo_tasks
from ._fleet import Backend as Backend
from ._fleet import FleetSummary as FleetSummary
from ._fleet import LocalBackend as LocalBackend
from ._fleet import run_fleet as run_fleet
from ._ray import FleetWorker as FleetWorker
from ._ray import RayBackend as RayBackend
from ._task import Factory as Factory
from ._task import FleetError as FleetError
from ._task import FleetTask as FleetTask
from ._task import StorageError as StorageError
from ._task import TaskResult as TaskResult
from ._task import TaskSetup as TaskSetup
from ._task import load_decisions as load_decisions
from ._task import load_tasks as load_tasks
from ._task import task_from_json as task_from_json
from ._worker import Job as Job
from ._worker import run_task as run_task

__all__ = [
    "Backend",
    "Factory",
    "FleetError",
    "FleetSummary",
    "FleetTask",
    "FleetWorker",
    "Job",
    "LocalBackend",
    "RayBackend",
    "StorageError",
    "TaskResult",
    "TaskSetup",
    "demo_factory",
    "demo_tasks",
    "load_decisions",
    "load_tasks",
    "run_fleet",
    "run_task",
    "task_from_json",
]
