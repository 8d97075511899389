"""A property test of your own tool: whatever arguments the model sends, the run stays
paired and the tool answers correctly.

Copy this file as ``test_my_tool.py`` into your tests and run ``pytest``. It needs
``pip install 'trio-agent[testing]'`` and pytest-trio's trio mode, in ``pytest.ini``::

    [pytest]
    trio_mode = true

(or ``trio_mode = true`` under ``[tool.pytest.ini_options]`` in ``pyproject.toml``):
Hypothesis cannot run an ``async def`` test by itself; trio mode runs it under trio.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    Context,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
    tool,
)
from trio_agent.testing import ScriptedModel, assert_run_invariants


@tool
async def divide(a: int, b: int) -> str:
    """Divide a by b (integer division).

    Args:
        a: the dividend.
        b: the divisor.
    """
    if b == 0:
        raise ValueError("division by zero")
    return str(a // b)


# Arguments as a model may send them: ints, numeric strings, junk, or missing.
JUNK = ["", "x", "1.5", "four", []]
argument = st.one_of(st.integers(), st.integers().map(str), st.sampled_from(JUNK), st.none())


# autojump_clock is a function-scoped fixture: Hypothesis reuses it for every example of
# the test, which is right for a clock, so that health check is turned off.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(a=argument, b=argument)
async def test_divide_in_a_run(autojump_clock, a, b):
    args = {k: v for k, v in (("a", a), ("b", b)) if v is not None}
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(ToolCall(id="c1", name="divide", arguments=args),),
                stop_reason="tool_use",
            ),
            AssistantMessage(content=(Text(text="done"),), stop_reason="stop"),
        ]
    )
    context = Context(tools=(divide,))
    events = []
    result = await run_agent_loop(
        [UserMessage.text("divide")], context, model, on_event=events.append
    )
    # Every call paired with one result, one AgentEnd, the caller's context untouched...
    assert_run_invariants(result, events, model.requests, context)
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    good = all(v is not None and v not in JUNK for v in (a, b))
    if good and int(b) != 0:
        assert not answer.is_error
        assert answer.text == str(int(a) // int(b))
    else:
        # Missing, junk or zero: an error result the model can read, never a crash.
        assert answer.is_error
