"""A fleet's transcript names: one file per task id, whatever the ids.

``transcript_relpath`` is the only place a task id becomes a file name. Two ids that got
one name would append two conversations to one transcript, so the mapping must be
injective — also for the adversarial case of an id spelled like another id's hashed
name — and every name must be a plain file name on every file system.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from trio_agent.fleet._task import transcript_relpath

SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
SAFE_CHARS = st.sampled_from("abcXYZ019._-")


def name_of(task_id: str) -> str:
    path = transcript_relpath(task_id)
    assert path.startswith("transcripts/")
    assert path.endswith(".jsonl")
    return path.removeprefix("transcripts/").removesuffix(".jsonl")


# Ids of every kind: any text (spaces, slashes, non-ASCII, lone surrogates, long); ids
# made of the characters kept as they are (short, so they often meet); hex-looking
# tails; and ids that are some other id's file name, or a near miss of one.
any_text = st.text(min_size=1, max_size=130)
safe_text = st.text(SAFE_CHARS, min_size=1, max_size=12)
hex_tail = st.tuples(
    safe_text, st.text(st.sampled_from("0123456789abcdefA"), min_size=15, max_size=17)
).map(lambda parts: f"{parts[0]}-{parts[1]}")
base_ids = st.one_of(any_text, safe_text, hex_tail)
names_as_ids = base_ids.map(name_of)
near_misses = st.tuples(names_as_ids, st.sampled_from(["", "0", "-", "a", "_", "."])).map(
    lambda parts: parts[0] + parts[1]
)
ids = st.one_of(base_ids, names_as_ids, near_misses, names_as_ids.map(lambda n: n[:-1]))


@given(st.lists(ids, min_size=2, max_size=20, unique=True))
def test_distinct_ids_get_distinct_transcripts(task_ids: list[str]) -> None:
    paths = [transcript_relpath(i) for i in task_ids]
    assert len(set(paths)) == len(paths), sorted(zip(paths, task_ids, strict=True))


@given(base_ids)
def test_an_id_spelled_like_another_ids_file_name_gets_its_own_file(task_id: str) -> None:
    spelled = name_of(task_id)
    if spelled != task_id:
        assert transcript_relpath(spelled) != transcript_relpath(task_id)


@given(ids)
def test_every_name_is_a_plain_portable_file_name(task_id: str) -> None:
    name = name_of(task_id)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", name), name
    assert not name.startswith(".")  # never hidden, never "." or ".."
    assert len(name) + len(".jsonl") <= 120  # far below every file system's 255 bytes


@given(st.text(SAFE_CHARS, min_size=1, max_size=100))
def test_plain_ids_keep_their_name(task_id: str) -> None:
    # Transcripts written before the hashed shape was set apart keep their path: a
    # plain id is its own name unless it looks like a hashed name (16 hex digits at the
    # end, after a "-" within the first 61 characters, or alone).
    looks_hashed = re.fullmatch(r"(?:[A-Za-z0-9._-]{1,60}-)?[0-9a-f]{16}", task_id)
    if SAFE.fullmatch(task_id) and not looks_hashed:
        assert name_of(task_id) == task_id
    else:
        assert name_of(task_id) != task_id


def test_names_of_other_ids_are_those_written_before() -> None:
    # The hashed form itself did not change: existing folders find these transcripts.
    assert name_of("a b") == "a_b-c8687a08aa5d6ed2"
    assert name_of("with context") == "with_context-66077ec6061c8c56"
    assert name_of("日本語") == "77710aedc74ecfa3"
    assert name_of(".hidden") == "hidden-1692419006a88aab"
    assert name_of("q-17") == "q-17"
    # The one id of the reported pair that moved: it was the name of "a b".
    assert name_of("a_b-c8687a08aa5d6ed2") == "a_b-c8687a08aa5d6ed2-b6200a9cee17044c"
