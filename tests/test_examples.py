"""Every program in ``examples/`` runs, offline, and prints what it promises; the
property-test example passes in a project of its own, as a user would copy it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT = 120


def run_example(name: str, *args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def pytest_in_own_project(test_file: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run pytest on ``test_file`` (its text) as the only test of a fresh project whose
    pytest.ini says ``trio_mode = true`` — nothing of this repository's configuration."""
    (folder / "test_copied.py").write_text(test_file, encoding="utf-8")
    (folder / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_copied.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=env,
    )


COVERED = {
    "tool_progress.py",
    "hooks.py",
    "steering.py",
    "resume_after_crash.py",
    "property_test_my_tool.py",
    "mcp_tools.py",
    "rollouts.py",
    "structured_output.py",
}


def test_every_example_is_run_by_a_test() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py")} == COVERED


def test_tool_progress() -> None:
    out = run_example("tool_progress.py")
    assert out.splitlines() == [
        "  progress of count_to: 1/3",
        "  progress of count_to: 2/3",
        "  progress of count_to: 3/3",
        "  count_to -> counted to 3 (ok)",
        "stop Done counting.",
    ]


def test_hooks_block_and_rewrite() -> None:
    out = run_example("hooks.py")
    assert out.splitlines() == [
        "c1 error: destructive commands are not allowed",
        "c2 ok: ran 'make' for at most 60 s",
        "c3 ok: ran 'echo [redacted]' for at most 10 s",
    ]


def test_steering_and_follow_up() -> None:
    out = run_example("steering.py")
    assert out.splitlines() == [
        "stop after 3 requests",
        "  user: what do my notes say about trio?",
        "  assistant: ",
        "  tool_result: 3 notes mention 'trio'",
        "  user: only the newest note matters",
        "  assistant: Three notes; only the newest matters, as you said.",
        "  user: now summarise it",
        "  assistant: Summary: use nurseries.",
    ]


def test_structured_output_extracts_an_attrs_class() -> None:
    out = run_example("structured_output.py")
    assert out.splitlines() == [
        "stop after 2 requests",
        "sent back: - lines[1].unit_price: expected a number",
        "Invoice(number='2026-114', customer='Ada Lovelace', lines=[Line(item='gear', "
        "quantity=2, unit_price=12.5), Line(item='lever', quantity=1, unit_price=4.0)], "
        "paid=False)",
        "total: 29.00",
        "streamed updates: 2",
    ]


def test_resume_after_a_real_crash(tmp_path: Path) -> None:
    out = run_example("resume_after_crash.py", str(tmp_path))
    assert out.splitlines() == [
        "the first run's process died with exit code 9",
        "after the crash: ['user', 'assistant'] torn: None",
        "resumed: stop Deployed.",
        "on disk: ['user', 'assistant', 'tool_result', 'assistant', 'tool_result', 'assistant']",
    ]


def test_rollouts(tmp_path: Path) -> None:
    out = run_example("rollouts.py", str(tmp_path))
    assert out.splitlines() == [
        "reward 1.0, 6 messages, 3 model calls",
        "merged sample: 32 prompt ids, 100 response ids, 88 of them the model's, 0 prefix breaks",
        "verl fields: ['metrics', 'num_turns', 'prompt_ids', 'response_ids', "
        "'response_logprobs', 'response_mask', 'reward_score']",
        "rollouts.jsonl: 4 lines, group 'sum', rewards [1.0, 1.0, 1.0, 1.0]",
        "from asyncio: 8 rollouts, rewards [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]",
    ]
    assert len((tmp_path / "rollouts.jsonl").read_text().splitlines()) == 4


def test_mcp_tools_with_the_demo_server() -> None:
    pytest.importorskip("mcp")
    out = run_example("mcp_tools.py")
    assert "srv__add -> 42" in out
    assert "answer: 2 + 40 = 42" in out


def test_the_property_test_example_passes_in_its_own_project(tmp_path: Path) -> None:
    text = (EXAMPLES / "property_test_my_tool.py").read_text(encoding="utf-8")
    done = pytest_in_own_project(text, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_property_test_example_fails_on_a_broken_tool(tmp_path: Path) -> None:
    # The example can fail: a tool that answers wrongly is caught.
    text = (EXAMPLES / "property_test_my_tool.py").read_text(encoding="utf-8")
    broken = text.replace("return str(a // b)", "return str(a // b + 1)")
    assert broken != text
    done = pytest_in_own_project(broken, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout


def test_examples_do_not_depend_on_the_current_folder(tmp_path: Path) -> None:
    assert "c1 error" in run_example("hooks.py", cwd=tmp_path)
    assert "resumed: stop" in run_example("resume_after_crash.py", cwd=tmp_path)
