"""The package says what it is: ``__version__`` and ``--version`` from its metadata,
a LICENSE matching pyproject's, project URLs, and extras named for what they are: a light
``[testing]`` (``[hypothesis]``, its old name, still works), a ``[test]`` with all the
suite needs but Ray, and ``[docs]`` with lower bounds."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import trio_agent
from trio_agent.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_version_comes_from_the_metadata() -> None:
    assert trio_agent.__version__ == importlib.metadata.version("trio-agent")


def test_the_command_line_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"trio-agent {trio_agent.__version__}"


@pytest.mark.parametrize(
    ("args", "code", "out", "err"),
    [
        (["--version"], 0, f"trio-agent {trio_agent.__version__}\n", ""),
        ([], 2, "", "the following arguments are required: COMMAND"),
        (["check", "no-such-file.jsonl"], 1, "", "no-such-file.jsonl: cannot read: "),
    ],
)
def test_python_dash_m_trio_agent_is_the_command(
    args: list[str], code: int, out: str, err: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_agent", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == code, done.stderr
    assert done.stdout == out
    assert err in done.stderr
    assert "Traceback" not in done.stderr


def test_license_urls_and_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(project["urls"])
    extras = project["optional-dependencies"]
    names = {d.split(">")[0].split("=")[0] for d in extras["testing"]}
    assert names == {"hypothesis", "hypothesis-jsonschema", "pytest", "pytest-trio"}
    assert extras["hypothesis"] == ["trio-agent[testing]"]


def test_the_test_extra_holds_the_optional_parts_the_suite_tests_but_ray() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "trio-agent[testing,mcp,otel,cost]" in extras["test"]
    assert extras["cost"] == ["genai-prices>=0.2.3"]
    assert not any(d.startswith(("ray", "trio-agent[ray")) for d in extras["test"])
    for requirement in extras["docs"]:
        assert ">=" in requirement, requirement
