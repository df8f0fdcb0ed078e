"""Pre-tokenization presets split as tiktoken's patterns do (checked with the
backtracking `regex` module on the published patterns)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok

regex = pytest.importorskip("regex")

# Characters Python's Unicode tables know, so that both engines agree on
# every property (the module's tables may be of another Unicode version).
known = st.characters(exclude_categories=["Cn", "Cs"])
mixed = st.lists(
    st.one_of(
        st.sampled_from([" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "’", "123456", "中文", "\u0301", "HELLO", "hello"]),
        # Long ASCII words and the characters around the letter ranges,
        # which the scanner classifies eight bytes at a time.
        st.text(alphabet="@AZ[`az{é ", max_size=12),
        st.sampled_from(["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]),
        st.text(alphabet=known, max_size=3),
    ),
    max_size=20,
).map("".join)


@pytest.mark.parametrize("preset", polytok.PRESETS)
@settings(max_examples=400, deadline=None)
@given(text=mixed)
def test_presets_equal_the_published_patterns(preset, text):
    pattern = regex.compile(polytok.pattern_regex(preset))
    assert polytok.pretokenize(text, preset) == pattern.findall(text)


def test_known_cases():
    assert polytok.pretokenize("Hello world's  123456 \n\n  x", "cl100k") == [
        "Hello", " world", "'s", " ", " ", "123", "456", " \n\n", " ", " x",
    ]
    assert polytok.pretokenize("I'm  OK", "gpt2") == ["I", "'m", " ", " OK"]
    assert polytok.pretokenize("HelloWORLD you're", "o200k") == ["Hello", "WORLD", " you're"]


def test_user_patterns_and_none_keep_all_text():
    assert polytok.pretokenize("ab12 cd", r"[a-z]+") == ["ab", "12 ", "cd"]
    assert polytok.pretokenize("ab cd", r"\w+(?=\s)") == ["ab", " cd"]
    assert polytok.pretokenize("ab cd", "none") == ["ab cd"]
    with pytest.raises(ValueError, match="invalid pre-tokenization pattern"):
        polytok.pretokenize("x", "(unclosed")

