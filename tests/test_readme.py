"""The README's code runs as written.

Every ```python block is preceded by a marker saying how it is tested:
``<!-- readme-test: run -->`` (a whole program, run as is),
``<!-- readme-test: fragment NAME -->`` (run inside an async function, after the setup
NAME below gives it the names it assumes, such as ``model`` or ``tools``),
``<!-- readme-test: pytest -->`` (a test file, run by pytest in a project of its own
with ``trio_mode = true``), or ``<!-- readme-test: skip (REASON) -->`` for the few that
need a network, a key or programs this machine may not have. A block without a marker
fails the test, so none is left out by accident.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(
    r"(?:<!-- readme-test: (?P<marker>[^\n]*?) -->\n[ \t]*)?```python\n(?P<code>.*?)```", re.S
)


def blocks() -> list[tuple[str, str]]:
    """(marker, dedented code) for every python block, in order; '' when unmarked."""
    text = README.read_text(encoding="utf-8")
    return [
        ((m.group("marker") or "").strip(), textwrap.dedent(m.group("code")))
        for m in BLOCK.finditer(text)
    ]


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


def test_the_readme_round_trip_example_runs(tmp_path: Path) -> None:
    marker, code = blocks()[0]
    assert marker == "run"
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "user → assistant → tool_result → assistant 2 stop"
    assert "# user → assistant → tool_result → assistant 2 stop" in code


def test_every_python_block_is_marked() -> None:
    found = blocks()
    assert len(found) >= 6
    for marker, code in found:
        assert marker, f"a README python block has no readme-test marker:\n{code[:200]}"
        kind = marker.split()[0]
        assert kind in ("run", "fragment", "pytest", "skip"), marker
        if kind == "skip":
            assert re.fullmatch(r"skip \(.+\)", marker), "a skip names its reason"


# The names each fragment assumes; AFTER checks what it did.
SETUP = {
    "agent": """
import trio, trio_agent
from pathlib import Path
from trio_agent import AssistantMessage, Text, UserMessage
from trio_agent.testing import ScriptedModel

Path("README.md").write_text("# tiny-pi\\n")
model = ScriptedModel([
    AssistantMessage(content=(Text(text="It is tiny-pi."),), stop_reason="stop"),
    AssistantMessage(content=(Text(text="A tiny agent runtime."),), stop_reason="stop"),
])
shown = []

async def show(events):
    async for event in events:
        shown.append(event.type)
""",
    "resume": """
import trio, trio_agent
from pathlib import Path
from trio_agent import AssistantMessage, Context, Text, ToolCall, UserMessage, tool
from trio_agent.testing import ScriptedModel

@tool
async def deploy(target: str) -> str:
    '''Deploy.

    Args:
        target: where.
    '''
    return "deployed"

tools = (deploy,)
# As a crash leaves it: a call without a result, and a torn last line.
trio_agent.write_transcript("run.jsonl", [
    UserMessage.text("deploy"),
    AssistantMessage(content=(ToolCall(id="c1", name="deploy", arguments={"target": "x"}),),
                     stop_reason="tool_use"),
])
with open("run.jsonl", "a") as f:
    f.write('{"role": "tool_res')
model = ScriptedModel([AssistantMessage(content=(Text(text="Done."),), stop_reason="stop")])
""",
    "telemetry": """
import trio
from trio_agent import AssistantMessage, Context, LoopConfig, Text, UserMessage, run_agent_loop
from trio_agent.testing import ScriptedModel

prompts = [UserMessage.text("summarise")]
context = Context(system_prompt="Be brief.")
model = ScriptedModel([AssistantMessage(content=(Text(text="Short."),), stop_reason="stop")])

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
""",
    "fleet": """
import json, trio
from pathlib import Path
from trio_agent import AssistantMessage, Text, Usage
from trio_agent.testing import ScriptedModel

Path("tasks.jsonl").write_text("".join(
    json.dumps({"id": f"q-{i}", "prompt": f"question {i}"}) + "\\n" for i in range(3)
))
my_tools = ()

def make_model():
    return ScriptedModel([AssistantMessage(content=(Text(text="42"),), stop_reason="stop",
                                           usage=Usage(input_tokens=5, output_tokens=1))])
""",
}
AFTER = {
    "agent": """
assert shown.count("agent_end") == 2, shown
assert len(model.requests) == 2
assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "user"]
print("ok")
""",
    "telemetry": """
names = sorted(span.name for span in exporter.get_finished_spans())
assert names == ["chat", "invoke_agent summariser"], names
print("ok")
""",
    "fleet": """
lines = Path("runs/eval-1/results.jsonl").read_text().splitlines()
assert sorted(json.loads(line)["id"] for line in lines) == ["q-0", "q-1", "q-2"]
assert all(json.loads(line)["reason"] == "stop" for line in lines)
print("ok")
""",
    "resume": """
loaded = trio_agent.load_transcript("run.jsonl")
assert loaded.torn_line is None
trio_agent.check_transcript(loaded.messages)
assert [m.role for m in loaded.messages] == ["user", "assistant", "tool_result", "assistant"]
print("ok")
""",
}


@pytest.mark.parametrize("name", sorted(SETUP))
def test_a_readme_fragment_runs(name: str, tmp_path: Path) -> None:
    (code,) = [c for m, c in blocks() if m == f"fragment {name}"]
    body = textwrap.indent(code, "    ")
    program = SETUP[name] + "\nasync def fragment():\n" + body + "\ntrio.run(fragment)\n"
    program += AFTER[name]
    done = _run(program, tmp_path)
    assert done.returncode == 0, done.stderr + "\n" + program
    assert done.stdout.strip().endswith("ok")


def test_the_readme_property_test_passes_as_copied(tmp_path: Path) -> None:
    (code,) = [c for m, c in blocks() if m == "pytest"]
    (tmp_path / "test_my_setup.py").write_text(code, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def _test_command() -> str:
    """The shell command under "Run the tests" in the README."""
    found = re.search(r"Run the tests[^\n]*\n\n```sh\n(.+?)\n```", README.read_text(), re.S)
    assert found, "the README has no test command"
    return found.group(1)


def test_ci_runs_the_readme_test_command_as_written() -> None:
    """.ci/run runs the README's test command character for character, before it installs
    anything else (CI runs in a fresh clone, so the venv is new)."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    command = _test_command()
    assert command in ci
    before = ci[: ci.index(command)]
    assert not any("pip install" in line or "venv" in line.split("#")[0] for line in before)


def test_the_readme_says_what_ci_adds() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    added = re.findall(r"pip install -q -e '\.\[([\w,-]+)\]'", ci)
    assert len(added) == 1
    text = " ".join(README.read_text().split())  # one line, as the paragraph reads
    said = re.search(r"`\.ci/run` runs exactly that command(.+?)\n?\.\s", text + " ")
    assert said, "the README does not say what .ci/run adds"
    for extra in added[0].split(","):
        assert f"`{extra}`" in said.group(1), extra
    for step in ("mypy --strict src", "ruff", "flake8-async", "mkdocs build --strict"):
        assert step in said.group(1), step
