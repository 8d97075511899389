"""A Hypothesis strategy for runs whose replies carry token ids (``tokenised_runs``).

Each drawn :class:`TokenisedRun` is a transcript whose assistant messages hold
:class:`~trio_agent.Tokens`, together with what a correct merge must find: the expected
merged samples as segments of ``(ids, made_by_the_model, logprobs)`` and the calls at
which the prefix property was broken (and where).
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st

from trio_agent import AssistantMessage, Message, Text, Tokens, UserMessage

__all__ = ["Segment", "TokenisedRun", "tokenised_runs"]


@attrs.frozen(kw_only=True)
class Segment:
    """A run of tokens in a merged sample: the model's (with logprobs) or not."""

    ids: tuple[int, ...]
    model: bool
    logprobs: tuple[float, ...] = ()


@attrs.frozen(kw_only=True)
class TokenisedRun:
    """A drawn transcript with tokens, and the merge it must give.

    Attributes:
        messages: the transcript: a user message, then per call an assistant message
            with tokens followed (but for the last) by a user message.
        samples: per expected merged sample, its segments in order (the first is the
            sample's prompt).
        breaks: ``(call index, position)`` of each call whose prompt rewrote history.
    """

    messages: tuple[Message, ...]
    samples: tuple[tuple[Segment, ...], ...]
    breaks: tuple[tuple[int, int], ...]


_IDS = st.integers(min_value=0, max_value=1000)


@st.composite
def _run(draw: st.DrawFn, max_calls: int, max_run: int) -> TokenisedRun:
    n = draw(st.integers(min_value=1, max_value=max_calls))
    messages: list[Message] = [UserMessage.text("task", timestamp=0.0)]
    samples: list[tuple[Segment, ...]] = []
    current: list[Segment] = []
    breaks: list[tuple[int, int]] = []
    sequence: list[int] = []
    for k in range(n):
        environment = draw(st.lists(_IDS, min_size=0 if k else 1, max_size=max_run))
        if k and draw(st.booleans()):
            # History rewritten: one earlier token differs (and the tail may be cut).
            at = draw(st.integers(min_value=0, max_value=len(sequence) - 1))
            old = sequence[at]
            other = draw(_IDS.filter(old.__ne__))
            cut = draw(st.integers(min_value=at + 1, max_value=len(sequence)))
            prompt = [*sequence[:at], other, *sequence[at + 1 : cut], *environment]
            breaks.append((k, at))
            samples.append(tuple(current))
            current = [Segment(ids=tuple(prompt), model=False)]
        else:
            prompt = [*sequence, *environment]
            current.append(Segment(ids=tuple(environment if k else prompt), model=False))
        completion = draw(st.lists(_IDS, max_size=max_run))
        logprobs = draw(
            st.lists(
                st.floats(min_value=-30.0, max_value=0.0),
                min_size=len(completion),
                max_size=len(completion),
            )
        )
        current.append(Segment(ids=tuple(completion), model=True, logprobs=tuple(logprobs)))
        sequence = [*prompt, *completion]
        messages.append(
            AssistantMessage(
                content=(Text(text=f"reply {k}"),),
                stop_reason="stop",
                timestamp=0.0,
                tokens=Tokens(prompt_ids=prompt, completion_ids=completion, logprobs=logprobs),
            )
        )
        if k < n - 1:
            messages.append(UserMessage.text(f"turn {k + 1}", timestamp=0.0))
    samples.append(tuple(current))
    return TokenisedRun(messages=tuple(messages), samples=tuple(samples), breaks=tuple(breaks))


def tokenised_runs(*, max_calls: int = 6, max_run: int = 8) -> st.SearchStrategy[TokenisedRun]:
    """Transcripts whose replies carry token ids, with the merge they must give.

    Each call's prompt either extends the previous prompt and completion by some
    environment tokens, or — drawn half the time — rewrites history (one earlier token
    changed, the tail possibly cut), which must start a new merged sample.

    Args:
        max_calls: the most model calls in a run.
        max_run: the most tokens in one completion or one run of environment tokens.
    """
    return _run(max_calls, max_run)
