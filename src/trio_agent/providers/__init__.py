"""HTTP models: OpenAI-compatible chat completions, the OpenAI Responses API, the
Anthropic Messages API and the Google Gemini API.

Both stream server-sent events over one shared ``httpx2`` client per model and
implement the ``Model`` protocol: ``Start``, block events, then one ``Done`` or
``Error`` whose message is the truth. Faults (HTTP errors, refused or dropped
connections, malformed or oversized frames, stalls, a stream cut short) end the reply
with an ``Error`` that keeps the partial content. Retries (``RetryPolicy``) happen only
before the first byte of a reply.

Layout: ``_sse`` decodes the event stream, ``_reply`` builds the reply, ``_options``
holds the connection settings, ``_secrets`` the API key, ``_session`` the client and
retries, ``_http`` the model class and the stream task, ``_history`` shapes the
transcript, and ``_openai`` / ``_responses`` / ``_anthropic`` / ``_gemini`` hold the wire formats.
"""

from ._anthropic import Anthropic as Anthropic
from ._gemini import Gemini as Gemini
from ._openai import OpenAIChat as OpenAIChat
from ._options import HTTPOptions as HTTPOptions
from ._options import RetryPolicy as RetryPolicy
from ._responses import OpenAIResponses as OpenAIResponses

__all__ = ["Anthropic", "Gemini", "HTTPOptions", "OpenAIChat", "OpenAIResponses", "RetryPolicy"]
