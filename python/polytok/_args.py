"""Checks of arguments that Python would otherwise take the wrong way: a
string where a list is expected (it is iterable, character by character),
an id beyond what the Rust side can even receive."""

from __future__ import annotations

from collections.abc import Iterable


def refuse_single_string(items: object, what: str = "texts") -> None:
    """A ``TypeError`` if ``items``, where a collection of strings is
    expected, is one string or bytes: ``"<a>"`` is not the three special
    tokens ``<``, ``a``, ``>``, nor ``"hello"`` five texts."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what} must be a list of strings, not a single {type(items).__name__}")


def text_list(items: Iterable[str], what: str = "texts") -> list[str]:
    """``items`` (texts, special tokens…) as a list (see
    :func:`refuse_single_string`)."""
    refuse_single_string(items, what)
    return list(items)


def batch_texts(texts: Iterable[str]) -> list[str]:
    """The texts of a batch as a list: the caller's own list where it is
    one, read and never kept (copying 100,000 texts costs milliseconds on
    one thread, outside the work spread over every core)."""
    return texts if type(texts) is list else text_list(texts)


def whole_numbers(minimum: int = 1, **values: int | None) -> None:
    """Check settings that must be whole numbers of at least ``minimum``
    (``None``: not set), before any work: the Rust side would take a
    negative or huge one as an ``OverflowError`` that names no setting,
    after counting the corpus."""
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be a whole number, not {value!r}")
        if not minimum <= value < 2**63:
            raise ValueError(f"{name} must be at least {minimum} (and below 2**63), not {value}")


def id_error(ids: int | Iterable[int], vocab_size: int) -> ValueError:
    """The error for an id that is not even an unsigned 32-bit number (the
    Rust side's ``OverflowError`` names none), worded as the Rust side's
    for ids beyond the vocabulary."""
    for i, value in enumerate([ids] if isinstance(ids, int) else ids):
        if not isinstance(value, int) or not 0 <= value < 2**32:
            where = "" if isinstance(ids, int) else f" (ids[{i}])"
            return ValueError(f"unknown token id {value!r}{where} (the vocabulary has ids 0..{vocab_size})")
    return ValueError(f"token ids must be integers in 0..{vocab_size}")
