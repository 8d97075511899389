"""Collecting a reply's token ids and log-probabilities from an OpenAI-compatible server.

vLLM and SGLang return the exact tokens of a chat completion when the request asks
(``return_token_ids: true``; ``logprobs: true`` for the log-probabilities):

- the prompt's ids as ``prompt_token_ids`` — on the response object (vLLM; in a stream,
  on its first chunk) or on the choice (SGLang);
- the generated ids as the choice's ``token_ids`` — the whole list in a JSON response,
  the ids of each chunk's delta in a stream (appended in order);
- one ``{"logprob": ...}`` entry per generated token in the choice's
  ``logprobs.content``, likewise whole or per chunk.

:class:`TokenCollector` gathers them for one request (one collector per request, so a
retried or failed request's tokens never mix with another's) and checks them: ids are
non-negative integers, log-probabilities numbers, one per generated id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core import Tokens
from ._reply import StreamFault

__all__ = ["TokenCollector"]


def _ids(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(type(i) is int and i >= 0 for i in value):
        raise StreamFault(f"malformed {what} from the server (expected a list of token ids)")
    return value


class TokenCollector:
    """The tokens of one reply, gathered from its response object or stream chunks."""

    def __init__(self) -> None:
        self._prompt: list[int] | None = None
        self._completion: list[int] = []
        self._logprobs: list[float] = []
        self._saw_completion = False
        self._version: str | None = None

    def response(self, chunk: Mapping[str, Any]) -> None:
        """Read the fields of a response object (or stream chunk) itself."""
        prompt = chunk.get("prompt_token_ids")
        if prompt is not None:
            self._prompt = list(_ids(prompt, "prompt_token_ids"))
        model = chunk.get("model")
        if isinstance(model, str) and model:
            self._version = model

    def choice(self, choice: Mapping[str, Any]) -> None:
        """Read the token fields of the first choice (a whole one, or a chunk's)."""
        prompt = choice.get("prompt_token_ids")
        if prompt is not None:
            self._prompt = list(_ids(prompt, "prompt_token_ids"))
        ids = choice.get("token_ids")
        if ids is not None:
            self._completion.extend(_ids(ids, "token_ids"))
            self._saw_completion = True
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, Mapping):
            entries = logprobs.get("content")
            if isinstance(entries, list):
                for entry in entries:
                    value = entry.get("logprob") if isinstance(entry, Mapping) else None
                    if type(value) is int:
                        value = float(value)
                    if type(value) is not float:
                        raise StreamFault(
                            "malformed logprobs from the server (an entry without a "
                            "numeric logprob)"
                        )
                    self._logprobs.append(value)

    def result(self) -> Tokens:
        """The reply's tokens.

        Raises:
            StreamFault: the server sent no token ids (it does not support
                ``return_token_ids``), or log-probabilities that are not one per id.
        """
        if self._prompt is None or not self._saw_completion:
            missing = "prompt_token_ids" if self._prompt is None else "token_ids"
            raise StreamFault(
                f"tokens were asked for but the server sent no {missing} (it needs a "
                "vLLM or SGLang server that supports return_token_ids)"
            )
        if self._logprobs and len(self._logprobs) != len(self._completion):
            raise StreamFault(
                f"the server sent {len(self._logprobs)} logprobs for "
                f"{len(self._completion)} generated token ids"
            )
        return Tokens(
            prompt_ids=tuple(self._prompt),
            completion_ids=tuple(self._completion),
            logprobs=tuple(self._logprobs),
            model_version=self._version,
        )
