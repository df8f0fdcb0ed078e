"""Fairness-aware training, shared by the trainers: what parity-aware
training measures each language on (a parallel development set, or target
compression ratios), checked and counted, and what the training record
says of it.

Parity-aware training (Foroutan et al., 2025) gives each merge to the
language that is worst off now, the one whose development text costs the
most tokens, rather than to the most frequent pair over all the text
(Unigram: each pruning round weighs the languages by their costs); see
``rust/src/parity.rs`` and each model's ``parity.rs``.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from polytok import _core
from polytok.counts import Counts, LanguageCounts, language_code
from polytok._args import whole_numbers
from polytok._files import PathLike, read_text
from polytok._progress import progress_callback, wanted

#: Each model's parity-aware trainer.
_PARITY_TRAINERS = {
    "bpe": _core.Bpe.train_parity,
    "wordpiece": _core.WordPiece.train_parity,
    "unigram": _core.Unigram.train_parity,
}

#: A parity target: a directory of ``CODE.txt`` development files, lines by
#: language, or a target compression ratio by language.
ParityTarget = PathLike | Mapping[str, Sequence[str]] | Mapping[str, float]


class Target:
    """A checked parity target for ``languages`` (in that order): the
    development set's counts (``dev``) or the ratios (``ratios``), and the
    record of it."""

    def __init__(self, parity: ParityTarget, languages: Sequence[str], template: Counts) -> None:
        self.dev: list[Counts] | None = None
        self.ratios: list[float] | None = None
        if isinstance(parity, (str, os.PathLike)):
            parity = _dev_lines(Path(parity))
        if not isinstance(parity, Mapping) or not parity:
            raise TypeError(
                "parity must be a directory of CODE.txt development files, a mapping of language to lines, "
                "or a mapping of language to target ratio"
            )
        _same_languages(parity, languages)
        values = [parity[language] for language in languages]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            for language, ratio in zip(languages, values):
                if not ratio > 0:
                    raise ValueError(f"the target ratio of {language!r} must be positive, not {ratio!r}")
            self.ratios = [float(v) for v in values]
            self.record: dict = {"target": "ratios", "ratios": dict(zip(languages, self.ratios))}
            return
        lines = {language: _lines(language, value) for language, value in zip(languages, values)}
        counts = {len(v) for v in lines.values()}
        if len(counts) > 1:
            usual = Counter(len(v) for v in lines.values()).most_common(1)[0][0]
            odd = ", ".join(f"{language} has {len(v)}" for language, v in lines.items() if len(v) != usual)
            raise ValueError(f"a development set is parallel (the same lines in every language): {odd} lines where the others have {usual}")
        digest = hashlib.sha256()
        for language in languages:
            digest.update(language.encode() + b"\0" + "\n".join(lines[language]).encode() + b"\0")
        self.dev = [template.empty().add_texts(lines[language]) for language in languages]
        self.record = {"target": "dev", "dev_lines": counts.pop(), "dev_sha256": digest.hexdigest()}


def _dev_lines(directory: Path) -> dict[str, list[str]]:
    """The lines of each ``CODE.txt`` file of a development directory."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: no such directory (the development set: a CODE.txt file per language)")
    files = sorted(p for p in directory.glob("*.txt") if not p.name.startswith("."))
    if not files:
        raise FileNotFoundError(f"{directory}: the development set holds no CODE.txt files")
    lines = {}
    for path in files:
        try:
            language_code(path.stem)
        except ValueError:
            raise ValueError(f"{path}: {path.stem!r} is not a language code") from None
        lines[path.stem] = read_text(path, "a development file").splitlines()
    return lines


def _same_languages(parity: Mapping, languages: Sequence[str]) -> None:
    """A ``ValueError`` naming the languages the target lacks or adds."""
    missing = sorted(set(languages) - set(parity))
    extra = sorted(set(parity) - set(languages))
    if missing:
        raise ValueError(f"the parity target has nothing for language(s) {', '.join(map(repr, missing))} of the training text")
    if extra:
        raise ValueError(f"the parity target has language(s) {', '.join(map(repr, extra))}, which the training text lacks")


def _lines(language: str, value: object) -> list[str]:
    """A language's development lines, checked."""
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"the development set of {language!r} must be a sequence of lines (strings)")
    if not value:
        raise ValueError(f"the development set of {language!r} is empty")
    return list(value)


def train_languages(
    trainer: type,
    model: str,
    counts: LanguageCounts,
    settings: dict,
    record: dict,
    *,
    balance: float | None,
    parity: ParityTarget | None,
    global_merges: int = 0,
    window: tuple[int, float] | None = None,
    progress: bool | None = None,
):
    """A tokenizer of ``trainer`` (a tokenizer class of ``model``) trained
    on the languages of ``counts``: balanced (``balance``) and, with
    ``parity``, parity-aware. ``settings``: the trainer's settings by their
    Python names; ``record``: what the model's training record holds
    besides the corpus and the languages."""
    if counts.model != model:
        raise ValueError(f"{trainer.__name__} trains from counts made for {model} (Counts.for_{model}), not for {counts.model}")
    whole_numbers(minimum=0, parity_global_merges=global_merges)
    if parity is None:
        if global_merges or window is not None:
            raise ValueError("parity_global_merges and parity_window are variants of parity-aware training: give parity too")
        return train_by_language(trainer, counts, balance, **settings, progress=progress)
    languages = list(counts)
    if len(languages) < 2:
        raise ValueError(f"parity-aware training weighs languages against each other: it needs two or more, not {len(languages)}")
    for code in languages:
        if not len(counts[code]):
            raise ValueError(f"language {code!r} has no text to learn from")
    target = Target(parity, languages, counts[languages[0]])
    if window is not None:
        size, share = window
        whole_numbers(parity_window=size)
        if not share > 0:
            raise ValueError(f"the share of parity_window must be positive, not {share!r}")
        window = (size, float(share))
    # Balance weighs the counts: the hybrid's merges by counts over all
    # languages see it. The counters are read, not emptied.
    weighed = counts if balance is None else counts.weighed(balance)
    arguments = {
        "dev": [c._core for c in target.dev] if target.dev is not None else None,
        "ratios": target.ratios, "global_merges": global_merges, "window": window, "names": languages,
    }
    with progress_callback(wanted(progress)) as callback:
        core, done = _PARITY_TRAINERS[model]([weighed[code]._core for code in languages], settings, arguments, callback)
    training = {
        **record,
        "corpus": {"bytes": sum(counts[code].text_bytes for code in languages), "distinct_pieces": done["distinct_pieces"]},
        **languages_record(counts, balance),
        "parity": parity_record(target, languages, done, global_merges, window, "rounds" if model == "unigram" else "merges"),
    }
    return trainer(core, training)


def train_by_language(trainer: type, counts: LanguageCounts, balance: float | None, **settings):
    """A tokenizer of ``trainer`` (a class with ``train_from_counts``)
    trained on the languages of ``counts``, balanced with ``balance``, with
    the languages in its training record."""
    merged = counts.total() if balance is None else counts.balanced(balance)
    tokenizer = trainer.train_from_counts(merged, **settings)
    tokenizer._training.update(languages_record(counts, balance))
    return tokenizer


def languages_record(counts: LanguageCounts, balance: float | None) -> dict:
    """What the training record says of the languages trained on."""
    return {
        "languages": {language: {"bytes": counts[language].text_bytes} for language in counts},
        "balance": balance,
    }


def parity_record(
    target: Target,
    languages: Sequence[str],
    done: dict,
    global_merges: int,
    window: tuple[int, float] | None,
    steps: str,
) -> dict:
    """What the training record says of parity-aware training: the target,
    the variants, how many ``steps`` (merges, or Unigram's rounds) each
    language was chosen for and each language's tokens (of its development
    text, or its training text with ratios) before and after; ``done``:
    what the core trainer returned."""
    chosen_by = {language: 0 for language in languages}
    by_all = 0
    for index in done["chosen"]:
        if index is None:
            by_all += 1
        else:
            chosen_by[languages[index]] += 1
    return {
        **target.record,
        "global_merges": global_merges,
        "window": list(window) if window else None,
        f"{steps}_by_all_languages": by_all,
        f"{steps}_by_language": chosen_by,
        "tokens_before": dict(zip(languages, done["tokens_before"])),
        "tokens_after": dict(zip(languages, done["tokens_after"])),
    }
