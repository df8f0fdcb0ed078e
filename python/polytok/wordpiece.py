"""WordPiece tokenizers (BERT's model): encoding, decoding, files."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Literal

from polytok import _core
from polytok._counting import corpus_record, count_files, count_texts
from polytok._args import id_error, text_list, whole_numbers
from polytok._files import PathLike, atomic_write, read_text
from polytok._progress import progress_callback, wanted
from polytok.counts import Counts, LanguageCounts, trainer_counter
from polytok.parity import ParityTarget, train_languages
from polytok.tokenizer import Preset

#: BERT's special tokens, the default of every constructor here.
BERT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class WordPieceTokenizer(Preset):
    """A WordPiece tokenizer, as BERT's.

    Text is normalized as BERT does (control characters removed, white space
    unified, spaces around CJK ideographs, and for uncased models lowercase
    without accents), cut into words at white space and punctuation, and
    each word is encoded greedily, the longest token first: a word-initial
    token, then continuation tokens (``##ing``). A word with no token at some
    point, or longer than ``max_input_chars_per_word`` characters, becomes the
    unknown token. Matching takes linear time in the word.

    As a :class:`polytok.Tokenizer`: the ``BertNormalizer`` and
    ``BertPreTokenizer`` of the model's settings, its special tokens, and
    BERT's template (``[CLS] A [SEP] B [SEP]``) when the vocabulary has
    ``[CLS]`` and ``[SEP]``: ``encode`` adds them unless
    ``add_special_tokens=False``.

    Create one with :meth:`train`, :meth:`train_from_iterator`,
    :meth:`from_vocab` (a BERT ``vocab.txt``) or :meth:`load`.
    """

    _core_type = _core.WordPiece

    # ----------------------------------------------------------------- training

    @classmethod
    def train(
        cls,
        files: PathLike | Iterable[PathLike],
        *,
        vocab_size: int = 30_000,
        min_frequency: int = 2,
        limit_alphabet: int | None = None,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        special_tokens: Sequence[str] = BERT_SPECIAL_TOKENS,
        unk_token: str = "[UNK]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
        errors: Literal["strict", "replace"] = "strict",
        progress: bool | None = None,
    ) -> WordPieceTokenizer:
        """Learn a WordPiece vocabulary from text files, by likelihood.

        Each step merges the adjacent pair (a, b) with the highest score
        count(ab) / (count(a) x count(b)) over the corpus's words, not the
        most frequent pair: pairs whose parts rarely occur apart come first.
        Ties go to the higher pair count, then to the older tokens (smaller
        ids), so the same corpus and settings give the same vocabulary.

        ``vocab_size`` counts the special tokens (first, in the order given;
        the unknown token is added if missing), the alphabet, and the merged
        tokens. ``limit_alphabet`` keeps only the most frequent characters:
        words with another character are left out, and encode as the unknown
        token. Pairs seen fewer than ``min_frequency`` times are not merged.
        Normalization options as in :meth:`from_vocab`. ``files``: paths,
        directories (every ``.txt`` below) and glob patterns, UTF-8
        (``errors="replace"`` replaces bad bytes). ``progress``: progress bars
        on stderr (default: when it is a terminal).
        """
        whole_numbers(vocab_size=vocab_size, limit_alphabet=limit_alphabet, max_input_chars_per_word=max_input_chars_per_word)
        whole_numbers(minimum=0, min_frequency=min_frequency)
        counter = cls._counter(lowercase, strip_accents, clean_text, handle_chinese_chars, special_tokens)
        with progress_callback(wanted(progress)) as callback:
            count_files(counter, files, errors, callback)
            return cls._train_counted(
                counter, vocab_size, min_frequency, limit_alphabet, unk_token,
                continuing_subword_prefix, max_input_chars_per_word, callback,
            )

    @classmethod
    def train_from_iterator(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int = 30_000,
        min_frequency: int = 2,
        limit_alphabet: int | None = None,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        special_tokens: Sequence[str] = BERT_SPECIAL_TOKENS,
        unk_token: str = "[UNK]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
        progress: bool | None = None,
    ) -> WordPieceTokenizer:
        """Learn a WordPiece vocabulary from strings (any iterable, consumed
        once). Arguments as in :meth:`train`."""
        whole_numbers(vocab_size=vocab_size, limit_alphabet=limit_alphabet, max_input_chars_per_word=max_input_chars_per_word)
        whole_numbers(minimum=0, min_frequency=min_frequency)
        counter = cls._counter(lowercase, strip_accents, clean_text, handle_chinese_chars, special_tokens)
        count_texts(counter, texts)
        with progress_callback(wanted(progress)) as callback:
            return cls._train_counted(
                counter, vocab_size, min_frequency, limit_alphabet, unk_token,
                continuing_subword_prefix, max_input_chars_per_word, callback,
            )

    @classmethod
    def train_from_counts(
        cls,
        counts: Counts | LanguageCounts,
        *,
        vocab_size: int = 30_000,
        min_frequency: int = 2,
        limit_alphabet: int | None = None,
        unk_token: str = "[UNK]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
        balance: float | None = None,
        parity: ParityTarget | None = None,
        parity_global_merges: int = 0,
        parity_window: tuple[int, float] | None = None,
        progress: bool | None = None,
    ) -> WordPieceTokenizer:
        """Learn a WordPiece vocabulary from :class:`polytok.Counts` made for
        WordPiece (:meth:`polytok.Counts.for_wordpiece`): byte for byte what
        :meth:`train` learns from the corpus they count. Normalization and
        special tokens are the counts'; ``counts`` are left as they are.
        Other arguments as in :meth:`train`.

        From :class:`polytok.LanguageCounts`, ``balance`` and ``parity``
        (with ``parity_global_merges`` and ``parity_window``) weigh the
        languages as in :meth:`polytok.BPETokenizer.train_from_counts`;
        parity-aware, each merge is the pair with the highest score
        ``count(ab) / (count(a) * count(b))`` in the words of the language
        that costs the most tokens now. The alphabet is that of all
        languages together. A language's cost is counted as training sees
        it (its words' symbols after the merges so far; a word outside the
        alphabet is one ``[UNK]``)."""
        whole_numbers(vocab_size=vocab_size, limit_alphabet=limit_alphabet, max_input_chars_per_word=max_input_chars_per_word)
        whole_numbers(minimum=0, min_frequency=min_frequency)
        settings = {
            "vocab_size": vocab_size,
            "min_frequency": min_frequency,
            "limit_alphabet": limit_alphabet,
            "unk_token": unk_token,
            "continuing_subword_prefix": continuing_subword_prefix,
            "max_input_chars_per_word": max_input_chars_per_word,
        }
        if isinstance(counts, LanguageCounts):
            return train_languages(
                cls, "wordpiece", counts, settings, cls._record(settings), balance=balance, parity=parity,
                global_merges=parity_global_merges, window=parity_window, progress=progress,
            )
        if balance is not None or parity is not None:
            raise ValueError("balance and parity weigh languages: train from polytok.LanguageCounts")
        counter = trainer_counter(counts, "wordpiece", cls)
        with progress_callback(wanted(progress)) as callback:
            return cls._train_counted(
                counter, vocab_size, min_frequency, limit_alphabet, unk_token,
                continuing_subword_prefix, max_input_chars_per_word, callback,
            )

    @staticmethod
    def _counter(lowercase, strip_accents, clean_text, handle_chinese_chars, special_tokens) -> _core.PieceCounter:
        strip = lowercase if strip_accents is None else strip_accents
        return _core.PieceCounter.bert(
            clean_text, handle_chinese_chars, strip, lowercase, text_list(special_tokens, "special_tokens")
        )

    @classmethod
    def _train_counted(
        cls, counter, vocab_size, min_frequency, limit_alphabet, unk_token, prefix, max_chars, callback
    ) -> WordPieceTokenizer:
        corpus = corpus_record(counter)
        settings = {
            "vocab_size": vocab_size,
            "min_frequency": min_frequency,
            "limit_alphabet": limit_alphabet,
            "unk_token": unk_token,
            "continuing_subword_prefix": prefix,
            "max_input_chars_per_word": max_chars,
        }
        core = _core.WordPiece.train(counter, settings, callback)
        return cls(core, {**cls._record(settings), "corpus": corpus})

    @staticmethod
    def _record(settings: dict) -> dict:
        """The training record, but for the corpus."""
        return {
            **{name: settings[name] for name in ("vocab_size", "min_frequency", "limit_alphabet")},
            "score": "count(ab) / (count(a) * count(b))",
            "tie_rule": "highest score, then highest pair count, then smallest (left id, right id)",
        }

    # -------------------------------------------------------------------- files

    @classmethod
    def from_vocab(
        cls,
        path: PathLike,
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        unk_token: str = "[UNK]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
        special_tokens: Sequence[str] = BERT_SPECIAL_TOKENS,
    ) -> WordPieceTokenizer:
        """Load a BERT ``vocab.txt`` (one token per line, ids from 0).

        The defaults are bert-base-uncased's; use ``lowercase=False`` for a
        cased model. ``strip_accents=None`` strips accents exactly when
        lowercasing, as BERT does. Special tokens absent from the vocabulary
        are ignored.
        """
        text = read_text(path, "a vocab.txt")
        return cls(
            _core.WordPiece.from_vocab_txt(
                text,
                os.fspath(path),
                unk_token,
                continuing_subword_prefix,
                max_input_chars_per_word,
                clean_text,
                handle_chinese_chars,
                lowercase if strip_accents is None else strip_accents,
                lowercase,
                text_list(special_tokens, "special_tokens"),
            )
        )

    def save_vocab(self, path: PathLike) -> None:
        """Save the vocabulary as a BERT ``vocab.txt``, atomically."""
        atomic_write(path, self._core.to_vocab_txt())

    # ----------------------------------------------------------------- encoding

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False, cleanup: bool = True) -> str:
        """The text of ``ids``: continuation tokens joined to the token before
        them, others separated by spaces; ``cleanup`` removes the space
        before punctuation and in English contractions (BERT's decoder).
        ``skip_special_tokens``: leave out ``[CLS]``, ``[SEP]``, ``[PAD]``...
        (Normalization is not undone: an uncased model decodes lowercase.)"""
        ids = self._kept(ids, skip_special_tokens)
        try:
            return self._core.decode(ids, cleanup)
        except OverflowError:
            raise id_error(ids, self.vocab_size) from None

    @property
    def settings(self) -> dict:
        """Normalization and matching settings."""
        return self._core.settings

    def __repr__(self) -> str:
        lowercase = self.settings["lowercase"]
        return f"WordPieceTokenizer(vocab_size={self.vocab_size}, lowercase={lowercase})"

