"""The wheel is whole: built from this checkout, installed in a fresh venv outside it,
``trio-agent bench --quick`` runs (the workloads ship in the package), ``--version`` and
``__version__`` report the metadata's version, and the LICENSE is in the wheel.

Skipped only when a wheel cannot be built or installed here (no build backend and no
package index to fetch one from); everything else is a failure.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(command: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the checkout with the wheel installed; its bin folder."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
        cwd=base,
    )
    if built.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {built.stderr.strip()[-500:]}")
    (wheel,) = dist.glob("trio_agent-*.whl")
    venv = base / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    assert made.returncode == 0, made.stderr
    bin_dir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    done = _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=base)
    if done.returncode != 0:
        pytest.skip(f"cannot install the wheel's dependencies here: {done.stderr.strip()[-500:]}")
    return bin_dir


def test_bench_quick_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    # The current folder has no benchmarks/: the suite must come from the package.
    done = _run([str(installed / "trio-agent"), "bench", "--quick"], cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    for row in ("W1 no consumer", "W2 wide batch", "W3 many runs", "W4 streaming", "W5 valid",
                "transcript load_transcript"):  # fmt: skip
        assert f"| {row}" in done.stdout, row
    assert "Traceback" not in done.stderr
    # The peak-RSS subprocesses ran from the package too.
    assert "peak RSS of" not in done.stderr


def test_version_and_license_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    version = _run(
        [str(installed / "python"), "-c",
         "import importlib.metadata as m, trio_agent; "
         "print(trio_agent.__version__, m.version('trio-agent'))"],
        cwd=tmp_path,
    )  # fmt: skip
    assert version.returncode == 0, version.stderr
    ours, metadata = version.stdout.split()
    assert ours == metadata
    cli = _run([str(installed / "trio-agent"), "--version"], cwd=tmp_path)
    assert cli.returncode == 0
    assert cli.stdout.strip() == f"trio-agent {metadata}"
    (wheel,) = (installed.parent.parent / "dist").glob("trio_agent-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        license_text = next(
            z.read(n).decode() for n in names if n.endswith("LICENSE") and "dist-info" in n
        )
        meta = next(z.read(n).decode() for n in names if n.endswith("dist-info/METADATA"))
    assert license_text.startswith("MIT License")
    assert "trio_agent/_bench/suite.py" in names
    assert "Project-URL: Source" in meta
    assert "Provides-Extra: hypothesis" in meta


def test_the_report_pages_ship_in_the_wheel(installed: Path, tmp_path: Path) -> None:
    # The page's style and scripts are package files: the demo's report needs them.
    (tmp_path / "README.md").write_text("# A folder\n")
    transcript = tmp_path / "demo.jsonl"
    done = _run(
        [str(installed / "trio-agent"), "demo", "--pace", "0", "--transcript", str(transcript)],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    page = transcript.with_suffix(".html").read_text(encoding="utf-8")
    assert 'id="report-data"' in page
    assert "function timeline(" in page
