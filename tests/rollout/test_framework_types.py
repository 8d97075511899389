"""The exporters' rows against the training frameworks' own classes.

- verifiers (0.4): ``to_verifiers()`` rows validated by ``verifiers.v1.types.TurnTokens``
  itself, and carried by its ``Response`` as a model call's tokens.
- SkyRL (0.3) ``TrajectoryOutput`` and verl (0.9) ``AgentLoopOutput``: both modules
  import torch (and verl's a Ray and Hydra stack) at their top, so they cannot be
  imported without it. The packages are installed without their dependencies and the
  class definitions are read from the installed source: every field the class requires
  is in the row, every key of the row is one of its fields, and each value has the
  field's annotated type (``list[int]``, ``Optional[list[float]]``, a nested model of
  the same module given as a dict of its fields, ...).

verifiers cannot share a virtualenv with the ``test`` extra (it pins ``mcp`` and
``openai`` below it), so these tests skip, saying why, where the packages are missing;
``.ci/run`` runs this module in a venv of its own with ``TRIO_AGENT_REQUIRE_PEERS`` set,
where a skip is a failure.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from trio_agent import AssistantMessage, Message, StopReason, Text, Tokens, UserMessage
from trio_agent.rollout import Trajectory


def unavailable(reason: str) -> None:
    """Skip, or fail where CI installed the frameworks (``TRIO_AGENT_REQUIRE_PEERS``)."""
    if os.environ.get("TRIO_AGENT_REQUIRE_PEERS"):
        pytest.fail(f"TRIO_AGENT_REQUIRE_PEERS is set, but {reason}")
    pytest.skip(reason)


def reply(
    prompt: list[int], completion: list[int], stop: StopReason = "tool_use"
) -> AssistantMessage:
    return AssistantMessage(
        content=(Text(text="r"),),
        stop_reason=stop,
        tokens=Tokens(
            prompt_ids=prompt,
            completion_ids=completion,
            logprobs=[-0.25 * (i + 1) for i in range(len(completion))],
            model_version="v7",
        ),
    )


def trajectory() -> Trajectory:
    """Three calls, each extending the one before (tool results between them), then a
    fourth that re-renders the history: two merged samples, one prefix break."""
    messages: list[Message] = [
        UserMessage.text("task"),
        reply([1, 2, 3], [10, 11]),
        UserMessage.text("tool output"),
        reply([1, 2, 3, 10, 11, 7, 8], [12]),
        UserMessage.text("more"),
        reply([1, 2, 3, 10, 11, 7, 8, 12, 9], [13, 14], stop="stop"),
        UserMessage.text("again"),
        reply([1, 2, 99], [15], stop="length"),
    ]
    return Trajectory.from_transcript(messages, reward=0.5)


# --- verifiers: its own classes -------------------------------------------------------


def verifiers_types() -> Any:
    if importlib.util.find_spec("verifiers") is None:
        unavailable("verifiers is not installed (pip install -e '.[rollout-peers]')")
    from verifiers.v1 import types

    return types


def test_verifiers_turn_tokens_take_each_call_as_it_is() -> None:
    types = verifiers_types()
    t = trajectory()
    rows = t.to_verifiers()
    assert len(rows) == len(t.calls) == 4
    for row, call in zip(rows, t.calls, strict=True):
        tokens = types.TurnTokens.model_validate(row)
        # Every serialised field of TurnTokens, and nothing else, with our values.
        assert tokens.model_dump() == row
        assert tokens.prompt_ids == list(call.prompt_ids)
        assert tokens.completion_ids == list(call.completion_ids)
        assert tokens.completion_logprobs == list(call.logprobs)
        response = types.Response(
            id="r",
            created=0,
            model="policy",
            message=types.AssistantMessage(content="r"),
            finish_reason="stop",
            tokens=row,
        )
        assert response.tokens == tokens


def test_verifiers_trace_graph_builds_our_merged_samples_from_the_rows() -> None:
    """Each row committed as a model call's tokens into verifiers' own trace graph (the
    path its train client takes): the branches verifiers trains on — token ids, sampled
    mask, logprobs spread over the sequence — are our merged samples, the prefix break
    included (a second branch)."""
    types = verifiers_types()
    from verifiers.v1 import graph
    from verifiers.v1.configs.agent import AgentConfig
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask

    t = trajectory()
    record = Trace(task=TraceTask(type="test", data={}), agent=AgentInfo(config=AgentConfig()))
    conversation: list[Any] = [types.UserMessage(content="task")]
    for i, row in enumerate(t.to_verifiers()):
        answer = types.AssistantMessage(content=f"reply {i}")
        graph.prepare_turn(record, list(conversation)).commit(
            types.Response(
                id=str(i),
                created=0,
                model="policy",
                message=answer,
                finish_reason="stop",
                tokens=types.TurnTokens.model_validate(row),
            )
        )
        conversation += [answer, types.UserMessage(content=f"environment {i}")]
    branches = [(b.token_ids, b.sampled_mask, b.logprobs) for b in record.branches]
    expected = [
        (
            [*s.prompt_ids, *s.response_ids],
            [False] * len(s.prompt_ids) + [bool(m) for m in s.loss_mask],
            [0.0] * len(s.prompt_ids) + list(s.logprobs or ()),
        )
        for s in t.samples
    ]
    assert len(expected) == 2
    assert branches == expected


# --- SkyRL and verl: their class definitions, read from the installed packages -------


def class_fields(distribution: str, path: str, name: str) -> tuple[dict[str, Any], ast.Module]:
    """The annotated fields of class ``name`` in the installed ``distribution``'s
    ``path``: field name to ``(annotation, has_default)``, and the parsed module."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        unavailable(f"{distribution} is not installed (pip install --no-deps {distribution})")
    source = Path(str(dist.locate_file(path)))
    if not source.is_file():
        unavailable(f"{distribution} {dist.version} has no {path}")
    module = ast.parse(source.read_text(encoding="utf-8"))
    return fields_of(module, name), module


def fields_of(module: ast.Module, name: str) -> dict[str, Any]:
    for node in module.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {
                item.target.id: (item.annotation, item.value is not None)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    raise AssertionError(f"no class {name} in the module")


def conforms(value: Any, annotation: ast.expr, module: ast.Module) -> bool:
    """Whether ``value`` (a JSON-ready exporter value) has the annotated type."""
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return value is None
    if isinstance(annotation, ast.Name):
        simple = {"int": int, "float": (int, float), "str": str, "bool": bool}
        if annotation.id == "Any":
            return True
        if annotation.id in simple:
            return isinstance(value, simple[annotation.id]) and not (
                isinstance(value, bool) and annotation.id != "bool"
            )
        # A model of the same module, given as a dict of its fields.
        nested = fields_of(module, annotation.id)
        return (
            isinstance(value, dict)
            and set(value) <= set(nested)
            and all(default for key, (_, default) in nested.items() if key not in value)
            and all(conforms(v, nested[k][0], module) for k, v in value.items())
        )
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return conforms(value, annotation.left, module) or conforms(value, annotation.right, module)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        kind = annotation.value.id
        args = (
            annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        )
        if kind == "Optional":
            return value is None or conforms(value, args[0], module)
        if kind == "Union":
            return any(conforms(value, a, module) for a in args)
        if kind in ("List", "list"):
            return isinstance(value, list) and all(conforms(v, args[0], module) for v in value)
        if kind in ("Dict", "dict"):
            return isinstance(value, dict) and all(
                conforms(k, args[0], module) and conforms(v, args[1], module)
                for k, v in value.items()
            )
    raise AssertionError(f"annotation not understood: {ast.unparse(annotation)}")


def check_row(row: dict[str, Any], fields: dict[str, Any], module: ast.Module) -> None:
    required = {name for name, (_, default) in fields.items() if not default}
    assert required <= set(row), f"missing required fields: {sorted(required - set(row))}"
    assert set(row) <= set(fields), f"not fields of the class: {sorted(set(row) - set(fields))}"
    for key, value in row.items():
        annotation = fields[key][0]
        assert conforms(value, annotation, module), (key, value, ast.unparse(annotation))


def test_skyrl_trajectory_output_fields() -> None:
    fields, module = class_fields(
        "skyrl", "skyrl/train/generators/skyrl_gym_generator.py", "TrajectoryOutput"
    )
    t = trajectory()
    rows = t.to_skyrl()
    assert len(rows) == len(t.samples) == 2
    for row, sample in zip(rows, t.samples, strict=True):
        check_row(row, fields, module)
        assert row["prompt_ids"] == list(sample.prompt_ids)
        assert row["response_ids"] == list(sample.response_ids)
        assert row["loss_mask"] == list(sample.loss_mask)
        assert row["rollout_logprobs"] == list(sample.logprobs or ())
        assert row["reward"] == 0.5
    assert [r["stop_reason"] for r in rows] == ["stop", "length"]


def test_verl_agent_loop_output_fields() -> None:
    fields, module = class_fields(
        "verl", "verl/experimental/agent_loop/agent_loop.py", "AgentLoopOutput"
    )
    t = trajectory()
    rows = t.to_verl()
    assert len(rows) == 2
    for row, sample in zip(rows, t.samples, strict=True):
        check_row(row, fields, module)
        assert row["response_mask"] == list(sample.loss_mask)
        assert row["response_logprobs"] == list(sample.logprobs or ())
        assert row["reward_score"] == 0.5
    # verl counts the first prompt, each reply and each environment turn between two.
    assert [r["num_turns"] for r in rows] == [6, 2]


def test_the_type_check_rejects_a_wrong_row() -> None:
    """The source-read check is not vacuous: a missing field, an unknown one and a
    wrong value type each fail it."""
    fields, module = class_fields(
        "verl", "verl/experimental/agent_loop/agent_loop.py", "AgentLoopOutput"
    )
    (row, _) = trajectory().to_verl()
    for bad in (
        {k: v for k, v in row.items() if k != "response_mask"},
        {**row, "loss_mask": row["response_mask"]},
        {**row, "response_logprobs": ["x"]},
        {**row, "metrics": {"no_such_metric": 1.0}},
    ):
        with pytest.raises(AssertionError):
            check_row(bad, fields, module)
