"""``Tokenizer``: the whole road from text to model input and back, the
same for every model.

A tokenizer is a model (byte-level BPE, WordPiece or Unigram) with the
steps around it, each a small component from its own module::

    text ─▶ special tokens ─▶ normalizer ─▶ pre-tokenizer ─▶ model
         ─▶ post-processor (template) ─▶ truncation ─▶ padding ─▶ Encoding
    ids ─▶ decoder ─▶ text

Special tokens are found first, in the text as given: they are never
normalized or split. The components only describe their step; the Rust
core receives the whole pipeline once and does the work, on all cores for
batches.

>>> import polytok
>>> from polytok import pre_tokenizers, processors
>>> bpe = polytok.BPETokenizer.train_from_iterator(["low lower lowest"] * 10, vocab_size=300)
>>> tok = polytok.Tokenizer(bpe.model, pre_tokenizer=pre_tokenizers.Pattern("cl100k"))
>>> enc = tok.encode("lowest low")
>>> [("lowest low")[s:e] for s, e in enc.offsets]
['lowest', ' low']
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple

from polytok import _core
from polytok._args import batch_texts, id_error, refuse_single_string, whole_numbers
from polytok._component import Component
from polytok._counting import without_surrogates
from polytok import _files
from polytok._files import PathLike, atomic_write
from polytok.pre_tokenizers import PreTokenizer
from polytok.processors import PostProcessor

if TYPE_CHECKING:
    import numpy as np

    from polytok.decoders import DecodeStream

class FlatIds(NamedTuple):
    """The ids of a batch of texts, flat (:meth:`Tokenizer.encode_batch_flat`):
    text ``i``'s ids are ``ids[offsets[i]:offsets[i + 1]]``."""

    #: Every id, one text after another (``uint32``).
    ids: np.ndarray
    #: Where each text's ids start, and the last one's end (``int64``,
    #: ``len(texts) + 1`` of them).
    offsets: np.ndarray


_PIPELINE_PARTS = (
    "normalizer",
    "pre_tokenizer",
    "post_processor",
    "decoder",
    "special_tokens",
    "added_tokens",
    "always_special",
    "added_token_flags",
    "truncation",
    "padding",
)

#: One encoded input: ids, type ids, attention and special-token masks,
#: and (computed on first use for single texts) character offsets, word
#: ids and tokens. It is also a sequence of its ids: ``len(enc)``,
#: ``enc[0]``, ``list(enc)``, and ``enc == [ids...]``.
Encoding = _core.Encoding

AllowedSpecial = Literal["all"] | Collection[str]
Model = _core.Bpe | _core.WordPiece | _core.Unigram
Input = str | tuple[str, str]


class Tokenizer(_core.TokenizerBase):
    """A model with its normalizer, pre-tokenizer, special tokens,
    post-processor, truncation, padding and decoder.

    ``model``: the Rust model of a tokenizer (``BPETokenizer(...).model``
    and the like), or a tokenizer, whose model is taken (not its steps).
    ``special_tokens``: text that is one token of the given id, recognized
    in text when allowed (``allowed_special``), before normalization, and
    left out by decoding with ``skip_special_tokens``. ``added_tokens``:
    text that is one token of the given id in every call, and is not
    special (Hugging Face's added tokens with ``special: false``); its id
    may be past the model's. ``always_special``: recognize the special
    tokens in every call, whatever ``allowed_special`` says, and leave them
    out of the special-tokens mask where found in text (as Hugging Face's
    added tokens are; tokenizers read from ``tokenizer.json`` files do).
    Components are from :mod:`polytok.normalizers`,
    :mod:`polytok.pre_tokenizers`, :mod:`polytok.processors` and
    :mod:`polytok.decoders`.
    """

    def __init__(
        self,
        model: Model | Tokenizer,
        *,
        normalizer: Component | None = None,
        pre_tokenizer: PreTokenizer | None = None,
        post_processor: PostProcessor | None = None,
        decoder: Component | None = None,
        special_tokens: Mapping[str, int] | None = None,
        added_tokens: Mapping[str, int] | None = None,
        always_special: bool = False,
    ) -> None:
        if isinstance(model, Tokenizer):
            model = model.model
        if not isinstance(model, (_core.Bpe, _core.WordPiece, _core.Unigram)):
            raise TypeError(
                f"model must be a polytok model (e.g. BPETokenizer(...).model), not {type(model).__name__}"
            )
        self._core = model
        self._normalizer = _component(normalizer, "normalizer")
        self._pre_tokenizer = _component(pre_tokenizer, "pre_tokenizer")
        self._post_processor = _component(post_processor, "post_processor")
        self._decoder = _component(decoder, "decoder")
        if special_tokens is not None and not isinstance(special_tokens, Mapping):
            raise TypeError("special_tokens must map each token's text to its id, e.g. {'<|endoftext|>': 100257}")
        if added_tokens is not None and not isinstance(added_tokens, Mapping):
            raise TypeError("added_tokens must map each token's text to its id, e.g. {'<tool_call>': 151657}")
        self._special_tokens = dict(special_tokens or {})
        self._added_tokens = dict(added_tokens or {})
        self._always_special = bool(always_special)
        # How added and special tokens are matched beyond their text
        # ({"token", "lstrip", "rstrip", "single_word", "normalized"}):
        # Hugging Face's added-token flags, set by the files that have them.
        self._added_token_flags: list[dict] = []
        self._truncation: dict | None = None
        self._padding: dict | None = None
        self._pipeline_cache = None
        self._training: dict | None = None

    # ---------------------------------------------------------------- the steps

    @property
    def model(self) -> Model:
        """The Rust model (shared, not copied, by tokenizers built on it)."""
        return self._core

    @property
    def normalizer(self) -> Component | None:
        return self._normalizer

    @property
    def pre_tokenizer(self) -> PreTokenizer | None:
        return self._pre_tokenizer

    @property
    def post_processor(self) -> PostProcessor | None:
        return self._post_processor

    @property
    def decoder(self) -> Component | None:
        return self._decoder

    @property
    def special_tokens(self) -> dict[str, int]:
        """The special tokens found in text when allowed: text -> id."""
        return dict(self._special_tokens)

    @property
    def added_tokens(self) -> dict[str, int]:
        """The added tokens that are not special, found in every call:
        text -> id."""
        return dict(self._added_tokens)

    @property
    def always_special(self) -> bool:
        """Whether the special tokens are recognized in every call."""
        return self._always_special

    @property
    def truncation(self) -> dict | None:
        """The truncation settings, or ``None``."""
        return None if self._truncation is None else dict(self._truncation)

    @property
    def padding(self) -> dict | None:
        """The padding settings, or ``None``."""
        return None if self._padding is None else dict(self._padding)

    def enable_truncation(
        self,
        max_length: int,
        *,
        stride: int = 0,
        strategy: Literal["longest_first", "only_first", "only_second"] = "longest_first",
        direction: Literal["right", "left"] = "right",
    ) -> None:
        """Cut encodings to ``max_length`` tokens, the template's special
        tokens included. What is cut off becomes ``overflowing`` windows of
        the same length that overlap by ``stride`` tokens. Pairs: the
        longer text gives up tokens first (``longest_first``), or only one
        of them does. ``direction="left"`` keeps the end instead."""
        strategies = {"longest_first": "LongestFirst", "only_first": "OnlyFirst", "only_second": "OnlySecond"}
        if strategy not in strategies:
            raise ValueError(f"strategy must be one of {', '.join(strategies)}, not {strategy!r}")
        whole_numbers(max_length=max_length)
        whole_numbers(minimum=0, stride=stride)
        settings = {
            "max_length": max_length,
            "stride": stride,
            "strategy": strategies[strategy],
            "direction": _direction(direction),
        }
        self._set(truncation=settings)

    def no_truncation(self) -> None:
        self._set(truncation=None)

    def enable_padding(
        self,
        *,
        length: int | None = None,
        pad_to_multiple_of: int | None = None,
        direction: Literal["right", "left"] = "right",
        pad_token: str | None = None,
        pad_id: int | None = None,
        pad_type_id: int = 0,
    ) -> None:
        """Pad encodings to ``length`` tokens, or in a batch to its longest
        (``length=None``), rounded up to a multiple of
        ``pad_to_multiple_of``; on the right or the left. The pad token is
        given by its text (``pad_token``, which the vocabulary must hold)
        or id; without either, the model's ``[PAD]``, ``<pad>`` or
        ``<|endoftext|>`` if it has one."""
        whole_numbers(length=length, pad_to_multiple_of=pad_to_multiple_of)
        whole_numbers(minimum=0, pad_type_id=pad_type_id, pad_id=pad_id)
        pad_token, pad_id = self._pad_token(pad_token, pad_id)
        settings = {
            "strategy": "BatchLongest" if length is None else {"Fixed": length},
            "direction": _direction(direction),
            "pad_to_multiple_of": pad_to_multiple_of,
            "pad_id": pad_id,
            "pad_type_id": pad_type_id,
            "pad_token": pad_token,
        }
        self._set(padding=settings)

    def no_padding(self) -> None:
        self._set(padding=None)

    def _pad_token(self, pad_token: str | None, pad_id: int | None) -> tuple[str, int]:
        if pad_id is not None:
            if pad_id >= self.vocab_size:
                raise ValueError(f"pad_id {pad_id} is not an id of this tokenizer (ids 0..{self.vocab_size})")
            return (pad_token if pad_token is not None else self.id_to_token(pad_id)), pad_id
        candidates = [pad_token] if pad_token is not None else ["[PAD]", "<pad>", "<|endoftext|>"]
        for token in candidates:
            found = self.token_to_id(token)
            if found is not None:
                return token, found
        if pad_token is not None:
            raise ValueError(f"padding: the pad token {pad_token!r} is not in the vocabulary (give pad_id)")
        raise ValueError("padding needs a pad token: this vocabulary has no [PAD], <pad> or <|endoftext|>; give pad_token or pad_id")

    def _set(self, **changes: Any) -> None:
        """Applies new settings, checked by building the pipeline: a bad
        setting leaves the tokenizer as it was."""
        old = (self._truncation, self._padding)
        for name, value in changes.items():
            setattr(self, f"_{name}", value)
        try:
            self._pipeline_cache = None
            self._pipeline
        except Exception:
            self._truncation, self._padding = old
            self._pipeline_cache = None
            raise

    def pipeline_dict(self) -> dict[str, Any]:
        """Every step's settings, as saved with the tokenizer."""
        return {
            "normalizer": None if self._normalizer is None else self._normalizer.to_dict(),
            "pre_tokenizer": None if self._pre_tokenizer is None else self._pre_tokenizer.to_dict(),
            "post_processor": None if self._post_processor is None else self._post_processor.to_dict(),
            "decoder": None if self._decoder is None else self._decoder.to_dict(),
            "special_tokens": sorted(self._special_tokens.items(), key=lambda item: item[1]),
            "added_tokens": sorted(self._added_tokens.items(), key=lambda item: item[1]),
            "always_special": self._always_special,
            "added_token_flags": [dict(f) for f in self._added_token_flags],
            "truncation": self._truncation,
            "padding": self._padding,
        }

    @property
    def _pipeline(self) -> _core.Pipeline:
        if self._pipeline_cache is None:
            spec = self.pipeline_dict()
            self._pipeline_cache = _core.Pipeline(self._core, json.dumps(spec))
        return self._pipeline_cache

    # ----------------------------------------------------------------- encoding
    # ``encode`` and ``encode_ids``, the calls on one text, are
    # ``_core.TokenizerBase``'s: a loop over short texts would spend as much
    # time in a Python frame around them as in encoding.

    def encode_batch(
        self,
        inputs: Sequence[Input],
        *,
        add_special_tokens: bool = True,
        allowed_special: AllowedSpecial = (),
        offsets: bool = False,
    ) -> list[Encoding]:
        """The encodings of many texts or ``(text, pair)`` tuples, on all
        cores, padded together if padding is on. ``offsets``: compute
        offsets and word ids now, on all cores (else each encoding computes
        its own when first read)."""
        inputs = _inputs(inputs)
        allowed = _allowed(allowed_special)
        try:
            return self._pipeline.encode_batch(inputs, add_special_tokens, allowed, offsets)
        except UnicodeEncodeError:
            return self._pipeline.encode_batch(_clean_inputs(inputs), add_special_tokens, allowed, offsets)

    def encode_batch_ids(
        self, texts: Sequence[str], *, add_special_tokens: bool = True, allowed_special: AllowedSpecial = ()
    ) -> list[list[int]]:
        """The ids of many texts, as lists, encoded on all cores."""
        texts = batch_texts(texts)
        allowed = _allowed(allowed_special)
        return self._pipeline.encode_batch_ids(texts, add_special_tokens, allowed)

    def encode_batch_flat(
        self, texts: Sequence[str], *, add_special_tokens: bool = True, allowed_special: AllowedSpecial = ()
    ) -> FlatIds:
        """The ids of many texts as two NumPy arrays, encoded on all cores
        and written without the GIL (no Python object per id): ``ids``, every
        id one text after another (``uint32``), and ``offsets``, where each
        text's ids start, ``n + 1`` of them (``int64``): text ``i``'s ids are
        ``ids[offsets[i]:offsets[i + 1]]``. Never truncated nor padded (see
        :meth:`encode_batch_numpy` for a padded matrix).

        >>> import polytok
        >>> tok = polytok.BPETokenizer.train_from_iterator(["low lower lowest"] * 10, vocab_size=300)
        >>> ids, offsets = tok.encode_batch_flat(["low", "lowest low", ""])
        >>> offsets.tolist(), ids.dtype.name
        ([0, 1, 5, 5], 'uint32')
        """
        texts = batch_texts(texts)
        allowed = _allowed(allowed_special)
        ids, offsets = self._pipeline.encode_batch_flat(texts, add_special_tokens, allowed)
        return FlatIds(ids, offsets)

    def encode_batch_numpy(
        self,
        inputs: Sequence[Input],
        *,
        add_special_tokens: bool = True,
        allowed_special: AllowedSpecial = (),
    ) -> dict[str, np.ndarray]:
        """A batch as NumPy arrays, ready for :mod:`polytok.embedding`:
        ``ids``, ``attention_mask`` and ``type_ids``, each ``(n, width)``
        ``uint32`` (padded as the tokenizer's padding says, or to the
        longest with the pad id, 0 if there is no pad token), and
        ``lengths``, the tokens of each row. No Python object per token."""
        inputs = _inputs(inputs)
        pad_id = self._padding["pad_id"] if self._padding else 0
        allowed = _allowed(allowed_special)
        try:
            arrays = self._pipeline.encode_batch_arrays(inputs, pad_id, add_special_tokens, allowed)
        except UnicodeEncodeError:
            arrays = self._pipeline.encode_batch_arrays(_clean_inputs(inputs), pad_id, add_special_tokens, allowed)
        ids, mask, types, lengths = arrays
        return {"ids": ids, "attention_mask": mask, "type_ids": types, "lengths": lengths}

    # ---------------------------------------------------------------- vocabulary

    @property
    def vocab_size(self) -> int:
        """Number of ids: the model's, and those of added tokens past them."""
        return self._pipeline.vocab_size

    def id_to_token(self, id: int) -> str:
        """A token's text, as the model has it (BPE bytes that are not
        UTF-8 on their own shown as ``<0xNN>``)."""
        try:
            return self._pipeline.id_to_token(id)
        except OverflowError:
            raise id_error(id, self.vocab_size) from None

    def token_to_id(self, token: str) -> int | None:
        """The id of a token given by its text, or ``None``."""
        return self._pipeline.token_to_id(token)

    def tokens(self, text: str, *, allowed_special: AllowedSpecial = ()) -> list[str]:
        """The tokens of ``text`` as the model has them (see
        :meth:`id_to_token`), without the template's."""
        return self.encode(text, add_special_tokens=False, allowed_special=allowed_special).tokens

    # ----------------------------------------------------------------- decoding

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        """The text of ``ids``: their tokens through the decoder (without
        one, their bytes joined). ``skip_special_tokens``: leave out the
        special tokens and the template's."""
        ids = _id_list(ids)
        try:
            return self._pipeline.decode(ids, skip_special_tokens)
        except OverflowError:
            raise id_error(ids, self.vocab_size) from None

    def decode_stream(self, *, skip_special_tokens: bool = False) -> DecodeStream:
        """A :class:`polytok.decoders.DecodeStream` over this tokenizer: fed
        one id at a time (as a model generates them), it gives text only
        once it is whole characters, and all it gives is :meth:`decode` of
        all the ids."""
        from polytok.decoders import DecodeStream

        return DecodeStream(self, skip_special_tokens=skip_special_tokens)

    def decode_batch(self, sequences: Iterable[Iterable[int]], *, skip_special_tokens: bool = False) -> list[str]:
        """:meth:`decode` of each sequence of ids."""
        return [self.decode(ids, skip_special_tokens=skip_special_tokens) for ids in sequences]

    # -------------------------------------------------------------------- files

    @property
    def training(self) -> dict | None:
        """The settings and corpus statistics the model was trained with."""
        return self._training

    def save(self, path: PathLike) -> None:
        """Save atomically, in the format the file name says:

        - ``*.json``: Hugging Face's ``tokenizer.json``
          (:meth:`to_tokenizer_json`), which ``tokenizers`` loads; a
          tokenizer it cannot express is refused, naming the step;
        - ``*.polytok``: polytok JSON (:meth:`to_json`): everything,
          the training record included;
        - the model's own files: ``*.tiktoken`` (BPE ranks), ``*.txt``
          (a WordPiece vocabulary), ``*.model`` (a SentencePiece Unigram
          model), which hold the model alone.

        :func:`polytok.load` reads each of them back."""
        name = os.fspath(path)
        suffix = name.lower().rsplit(".", 1)[-1] if "." in os.path.basename(name) else ""
        if suffix == "json":
            atomic_write(path, self.to_tokenizer_json())
        elif suffix == "polytok":
            atomic_write(path, self.to_json())
        elif suffix in _MODEL_FILES:
            writer, model_type = _MODEL_FILES[suffix]
            if not isinstance(self._core, model_type) or not isinstance(self, Preset):
                raise ValueError(
                    f"{name}: a .{suffix} file holds a {model_type.__name__} preset's model alone, "
                    f"not this {type(self).__name__}: use .json or .polytok"
                )
            atomic_write(path, getattr(self._core, writer)())
        else:
            raise ValueError(
                f"{name}: the file name says no format: use .json (Hugging Face's tokenizer.json), "
                ".polytok (polytok JSON), or the model's own .tiktoken, .txt or .model"
            )

    def to_tokenizer_json(self) -> str:
        """Hugging Face's ``tokenizer.json`` text of this tokenizer: the
        same ids and offsets with ``tokenizers.Tokenizer.from_str``. Its
        special tokens become added tokens, which Hugging Face recognizes
        in every call. A step Hugging Face lacks (``HalfWidth``, say) is a
        ``ValueError`` naming it."""
        return _core.to_tokenizer_json(self._core, json.dumps(self.pipeline_dict()))

    def to_json(self) -> str:
        """The polytok JSON that :meth:`save` writes."""
        training = None if self._training is None else json.dumps(self._training)
        pipeline = self._saved_pipeline()
        return self._core.to_json(training, None if pipeline is None else json.dumps(pipeline))

    @classmethod
    def _from_pipeline(cls, core: Model, pipeline: dict, source: str) -> Tokenizer:
        """A composed tokenizer from its saved pipeline; a part polytok
        does not know is named in a :class:`polytok.TokenizerFileError`."""

        # special_token_strip: the flags' name in files of polytok 0.x.
        unknown = set(pipeline) - {"preset", "special_token_strip", *_PIPELINE_PARTS}
        if unknown:
            raise _core.TokenizerFileError(f"{source}: unknown pipeline part(s) {', '.join(sorted(unknown))}")
        try:
            special = {text: id for text, id in pipeline.get("special_tokens") or []}
            added = {text: id for text, id in pipeline.get("added_tokens") or []}
            always = bool(pipeline.get("always_special", False))
            return cls(core, special_tokens=special, added_tokens=added, always_special=always, **_components(pipeline))
        except (TypeError, ValueError) as e:
            raise _core.TokenizerFileError(f"{source}: {e}") from None

    def _saved_pipeline(self) -> dict | None:
        """The pipeline as saved: everything, for a composed tokenizer."""
        return {"preset": False, **self.pipeline_dict()}

    def _restore(self, pipeline: dict, source: str) -> None:
        """Applies a saved pipeline's truncation, padding and recognition
        of added tokens; what the core refuses is a
        :class:`polytok.TokenizerFileError` naming ``source``."""
        self._always_special = bool(pipeline.get("always_special", False))
        flags = pipeline.get("added_token_flags") or pipeline.get("special_token_strip") or []
        self._added_token_flags = [dict(f) for f in flags]
        try:
            self._set(truncation=pipeline.get("truncation"), padding=pipeline.get("padding"))
        except (TypeError, ValueError) as e:
            raise _core.TokenizerFileError(f"{source}: {e}") from None

    def __reduce__(self):
        """Pickles as the polytok JSON that :meth:`save` writes: exact, a
        fraction of the model's memory, and the same for every
        ``multiprocessing`` start method."""
        return (from_json, (self.to_json(), f"<pickled {type(self).__name__}>"))

    def __repr__(self) -> str:
        steps = ", ".join(f"{k}={v!r}" for k, v in self.pipeline_dict().items() if v)
        model = type(self._core).__name__
        if getattr(self._core, "segmentation", None) == "bpe":
            model = "SentencePiece BPE"
        return f"Tokenizer({model}, {steps})"


class Preset(Tokenizer):
    """What the model presets (:class:`polytok.BPETokenizer`,
    :class:`polytok.WordPieceTokenizer`, :class:`polytok.UnigramTokenizer`)
    share: the steps that their model was trained with (and saved with
    it), so that a preset's file needs no pipeline of its own; truncation
    and padding can still be turned on."""

    _core_type: ClassVar[type]

    def __init__(self, core: Model, training: dict | None = None) -> None:
        spec = json.loads(_core.preset_pipeline(core))
        super().__init__(core, special_tokens=dict(spec["special_tokens"]), **_components(spec))
        self._training = training

    @classmethod
    def load(cls, path: PathLike) -> Preset:
        """Load a tokenizer saved with :meth:`save` (any format
        :func:`polytok.load` reads) that holds this preset."""
        from polytok import load

        source = os.fspath(path)
        kind, text = _files.sniff(path)
        if kind == "polytok":
            # The model's own reader names what is wrong with its file.
            tokenizer = from_json(text, source, cls)
        else:
            tokenizer = load(path)
        if not isinstance(tokenizer, cls):
            raise _core.TokenizerFileError(
                f"{source}: holds a {type(tokenizer).__name__}, not a {cls.__name__} (polytok.load reads any)"
            )
        return tokenizer

    def _kept(self, ids: Iterable[int], skip_special_tokens: bool) -> list[int]:
        """``ids`` as a list, without the special tokens if asked (for the
        presets that decode with their model's own rules)."""
        ids = _id_list(ids)
        return self._pipeline.without_special(ids) if skip_special_tokens else ids

    def _saved_pipeline(self) -> dict | None:
        """Only what differs from the preset: its truncation and padding
        (files of presets without them are as they always were)."""
        if self._truncation is None and self._padding is None and not self._always_special and not self._added_token_flags:
            return None
        saved = {"preset": True, "truncation": self._truncation, "padding": self._padding}
        if self._always_special:
            saved["always_special"] = True
        if self._added_token_flags:
            saved["added_token_flags"] = self._added_token_flags
        return saved


def from_json(text: str, source: str = "<polytok JSON>", preset: type[Preset] | None = None) -> Tokenizer:
    """The tokenizer of polytok JSON (what :meth:`Tokenizer.save` writes):
    a preset (:class:`polytok.BPETokenizer`, ...) for a preset's file, a
    :class:`Tokenizer` for a composed one. ``preset``: the model the file
    must hold (its reader names what is wrong otherwise)."""
    if preset is None:
        from polytok.bpe import BPETokenizer
        from polytok.sentencepiece import SentencePieceTokenizer
        from polytok.wordpiece import WordPieceTokenizer

        presets = {"wordpiece": WordPieceTokenizer, "unigram": SentencePieceTokenizer}
        # Not a polytok file: the loader of BPE files reports what is wrong.
        preset = presets.get(_core.file_model(text), BPETokenizer)
    core, training, pipeline = preset._core_type.from_json(text, source)
    training = json.loads(training) if training else None
    pipeline = json.loads(pipeline) if pipeline else None
    if preset._core_type is _core.Unigram:
        from polytok.sentencepiece import SentencePieceTokenizer

        kind = SentencePieceTokenizer.of_class(core)
        if not issubclass(kind, preset):
            raise _core.TokenizerFileError(f"{source}: holds a {kind.__name__}, not a {preset.__name__}")
        preset = kind
    if pipeline is None or pipeline.get("preset", False):
        tokenizer = preset(core, training)
    else:
        tokenizer = Tokenizer._from_pipeline(core, pipeline, source)
        tokenizer._training = training
    if pipeline is not None:
        tokenizer._restore(pipeline, source)
    return tokenizer


def from_tokenizer_json(text: str, source: str = "<tokenizer.json>") -> Tokenizer:
    """The tokenizer of Hugging Face ``tokenizer.json`` text: a preset
    (:class:`polytok.BPETokenizer`, ...) when its steps are the preset's,
    else a :class:`Tokenizer`; its special tokens are recognized in every
    call, as in ``tokenizers``. A step polytok lacks is a
    :class:`polytok.TokenizerFileError` naming it and its place."""
    return _tokenizer_json(*_core.from_tokenizer_json(text, source), source)


def read_tokenizer_json(path: PathLike) -> Tokenizer:
    """:func:`from_tokenizer_json` of the file at ``path``, read by the core
    (no Python string of the whole file)."""
    return _tokenizer_json(*_core.read_tokenizer_json(path), os.fspath(path))


def _tokenizer_json(core: Model, pipeline_json: str, source: str) -> Tokenizer:
    """A tokenizer read from a tokenizer.json: the preset its steps are, or
    a composed one."""
    pipeline = json.loads(pipeline_json)
    preset = _preset_of(core, pipeline)
    if preset is not None:
        tokenizer: Tokenizer = preset(core)
    else:
        tokenizer = Tokenizer._from_pipeline(core, pipeline, source)
    tokenizer._restore(pipeline, source)
    return tokenizer


def from_tekken(text: str, source: str = "<Tekken>") -> Tokenizer:
    """The tokenizer of a Mistral Tekken file's text (``tekken_*.json``,
    as ``mistral-common`` reads it): the ranks' ids follow the file's
    special ids; special tokens are found in text only when allowed."""
    core, pipeline = _core.from_tekken_json(text, source)
    return Tokenizer._from_pipeline(core, json.loads(pipeline), source)


def _preset_of(core: Model, pipeline: dict) -> type[Preset] | None:
    """The preset class whose steps ``pipeline`` has, if any."""
    from polytok.bpe import BPETokenizer
    from polytok.sentencepiece import SentencePieceTokenizer
    from polytok.unigram import UnigramTokenizer
    from polytok.wordpiece import WordPieceTokenizer

    preset = json.loads(_core.preset_pipeline(core))
    steps = ("normalizer", "pre_tokenizer", "post_processor", "decoder")
    if any(pipeline.get(step) != preset.get(step) for step in steps):
        return None
    if sorted(map(tuple, pipeline["special_tokens"])) != sorted(map(tuple, preset["special_tokens"])):
        return None
    if pipeline.get("added_tokens"):
        return None
    for cls in (BPETokenizer, WordPieceTokenizer, UnigramTokenizer):
        if isinstance(core, cls._core_type):
            return SentencePieceTokenizer.of_class(core) if cls is UnigramTokenizer else cls
    return None


#: The model's own files, by suffix: the model method that writes one,
#: and the model it holds.
_MODEL_FILES = {
    "tiktoken": ("to_tiktoken", _core.Bpe),
    "txt": ("to_vocab_txt", _core.WordPiece),
    "model": ("to_sentencepiece", _core.Unigram),
}


def _components(pipeline: dict) -> dict[str, Component | None]:
    """The steps of a pipeline's JSON as components (``None`` where absent)."""
    return {
        key: None if pipeline.get(key) is None else Component.build(key, pipeline[key])
        for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder")
    }


def _component(value: Component | None, kind: str) -> Component | None:
    if value is not None and (not isinstance(value, Component) or value.kind != kind):
        raise TypeError(f"{kind} must be a polytok {kind.replace('_', '-')} component, not {value!r}")
    return value


def _allowed(allowed: AllowedSpecial) -> str | list[str] | None:
    """``"all"`` as it is (the core checks it), a collection as a list."""
    return allowed if isinstance(allowed, str) else list(allowed) or None


def _id_list(ids: Iterable[int]) -> list[int]:
    """Ids as a list (an :data:`Encoding` gives its ids at once)."""
    return ids.ids if isinstance(ids, _core.Encoding) else list(ids)


def _clean_inputs(inputs: list[Input]) -> list[Input]:
    """Inputs with lone surrogates replaced by U+FFFD."""
    return [
        without_surrogates(item) if isinstance(item, str) else tuple(without_surrogates(t) for t in item)
        for item in inputs
    ]


def _inputs(inputs: Sequence[Input]) -> list[Input]:
    refuse_single_string(inputs, "texts")
    return [tuple(item) if isinstance(item, list) else item for item in inputs]


def _direction(direction: str) -> str:
    if direction not in ("right", "left"):
        raise ValueError(f"direction must be 'right' or 'left', not {direction!r}")
    return direction.capitalize()
