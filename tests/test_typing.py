"""``AgentRunResult[T].output`` is typed: mypy --strict sees ``T`` through
``run_agent_loop``, ``open_agent_loop`` and ``Agent.prompt`` (tests/typing/)."""

from __future__ import annotations

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the lint extra")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _mypy(*paths: str) -> tuple[str, int]:
    out, err, status = api.run(
        ["--strict", "--no-incremental", "--config-file", str(ROOT / "pyproject.toml"), *paths]
    )
    return out + err, status


def test_output_types_are_seen_by_mypy(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    # The same checks, one of them wrong: mypy must say so (the check can fail).
    text = (HERE / "typing" / "output_types.py").read_text()
    wrong.write_text(
        text.replace("assert_type(typed.output, Invoice)", "assert_type(typed.output, str)")
    )
    out, status = _mypy(str(HERE / "typing" / "output_types.py"), str(wrong))
    assert "output_types.py" not in out, out
    assert status == 1
    assert "wrong.py:" in out, out
    assert 'Expression is of type "Invoice", not "str"' in out, out
