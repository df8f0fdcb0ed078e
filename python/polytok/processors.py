"""Post-processors: the special tokens a model's input carries around the
text or pair of texts (BERT's ``[CLS] A [SEP] B [SEP]``, RoBERTa's
``<s> A </s></s> B </s>``, BOS/EOS, or any template).

Templates are written as in Hugging Face ``tokenizers``: ``$A`` and ``$B``
stand for the texts, other items are special tokens, and ``:N`` sets the
type id (``"[CLS] $A [SEP] $B:1 [SEP]:1"``). They are saved in its
``tokenizer.json`` shape. Truncation and padding are settings of the
tokenizer (:meth:`polytok.Tokenizer.enable_truncation`,
:meth:`polytok.Tokenizer.enable_padding`), applied after the template.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as Seq
from typing import Any

from polytok._component import Component, build_steps, check_steps

SpecialTokens = Seq[tuple[str, int]] | Mapping[str, int]


class PostProcessor(Component):
    """A post-processing step."""

    kind = "post_processor"


class TemplateProcessing(PostProcessor):
    """Special tokens around one text (``single``) or a pair (``pair``).

    ``single="[CLS] $A [SEP]"``, ``pair="[CLS] $A [SEP] $B:1 [SEP]:1"``,
    ``special_tokens=[("[CLS]", 101), ("[SEP]", 102)]``: every special token
    a template names must be given with its id. A tokenizer without a
    ``pair`` template refuses pairs.
    """

    _fields = ("single", "pair", "special_tokens")

    def __init__(
        self,
        single: str | list,
        pair: str | list | None = None,
        special_tokens: SpecialTokens | dict = (),
    ) -> None:
        self.single = _template(single, "single")
        self.pair = None if pair is None else _template(pair, "pair")
        self.special_tokens = _special_tokens(special_tokens)
        for name, items in (("single", self.single), ("pair", self.pair)):
            if items is None:
                continue
            for item in items:
                token = item.get("SpecialToken")
                if token and token["id"] not in self.special_tokens:
                    raise ValueError(f"template {name}: {token['id']!r} is not among special_tokens (give its id)")
            sequences = [item["Sequence"]["id"] for item in items if "Sequence" in item]
            wanted = ["A"] if name == "single" else ["A", "B"]
            if sorted(sequences) != wanted:
                raise ValueError(
                    f"template {name} must hold {' and '.join('$' + w for w in wanted)} exactly once, not {sequences}"
                )


class BertProcessing(PostProcessor):
    """BERT's ``[CLS] A [SEP]`` and ``[CLS] A [SEP] B [SEP]`` (type ids 0,
    then 1 for B and its ``[SEP]``). ``sep`` and ``cls``: ``(token, id)``."""

    _fields = ("sep", "cls")

    def __init__(self, sep: tuple[str, int], cls: tuple[str, int]) -> None:
        self.sep = _token(sep, "sep")
        self.cls = _token(cls, "cls")


class RobertaProcessing(PostProcessor):
    """RoBERTa's ``<s> A </s>`` and ``<s> A </s></s> B </s>`` (type ids 0).
    ``sep`` and ``cls``: ``(token, id)``. ``trim_offsets``: a token's
    offsets leave out the spaces at its ends (byte-level BPE's ``" the"``
    covers ``the``), except, with ``add_prefix_space``, the one space of a
    text's first token (as Hugging Face's)."""

    _fields = ("sep", "cls", "trim_offsets", "add_prefix_space")

    def __init__(
        self, sep: tuple[str, int], cls: tuple[str, int], trim_offsets: bool = False, add_prefix_space: bool = False
    ) -> None:
        self.sep = _token(sep, "sep")
        self.cls = _token(cls, "cls")
        self.trim_offsets = bool(trim_offsets)
        self.add_prefix_space = bool(add_prefix_space)


class ByteLevel(PostProcessor):
    """Hugging Face's post-processor of byte-level BPE: no tokens added;
    with ``trim_offsets``, offsets trimmed as :class:`RobertaProcessing`
    trims them (the files of GPT-NeoX and Pythia). ``use_regex`` matters to
    the pre-tokenizer only (kept for the files)."""

    _fields = ("add_prefix_space", "trim_offsets", "use_regex")

    def __init__(self, add_prefix_space: bool = True, trim_offsets: bool = True, use_regex: bool = True) -> None:
        self.add_prefix_space = bool(add_prefix_space)
        self.trim_offsets = bool(trim_offsets)
        self.use_regex = bool(use_regex)


class Sequence(PostProcessor):
    """The steps in order, at most one of which adds tokens (Llama 3's
    :class:`ByteLevel` then :class:`TemplateProcessing`)."""

    _fields = ("processors",)

    def __init__(self, *, processors: Seq[PostProcessor]) -> None:
        self.processors = check_steps("Sequence", "processors", processors, PostProcessor)

    @classmethod
    def _from_settings(cls, settings: dict[str, Any]) -> PostProcessor:
        return cls(processors=build_steps("Sequence", "processors", settings, "post_processor"))


def _token(value: Any, name: str) -> list:
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not isinstance(value[0], str)
        or not isinstance(value[1], int)
        or isinstance(value[1], bool)
        or value[1] < 0
    ):
        raise TypeError(f"{name} must be a (token, id) pair such as ('[SEP]', 102), not {value!r}")
    return [value[0], value[1]]


def _template(template: str | list, name: str) -> list[dict]:
    """A template string (``"[CLS] $A [SEP]"``) as the list of items that
    tokenizer.json holds; such a list is checked and kept."""
    if isinstance(template, list):
        for item in template:
            if not (isinstance(item, dict) and len(item) == 1 and next(iter(item)) in ("SpecialToken", "Sequence")):
                raise ValueError(f"template {name}: {item!r} is neither a SpecialToken nor a Sequence")
        return template
    if not isinstance(template, str) or not template.split():
        raise ValueError(f"template {name} must be a non-empty string such as '[CLS] $A [SEP]', not {template!r}")
    items = []
    for word in template.split():
        text, type_id = word, 0
        head, colon, tail = word.rpartition(":")
        if colon and head and tail.isdigit():
            text, type_id = head, int(tail)
        if text in ("$A", "$B"):
            items.append({"Sequence": {"id": text[1], "type_id": type_id}})
        elif text.startswith("$"):
            raise ValueError(f"template {name}: {text!r} is no sequence: use $A or $B")
        else:
            items.append({"SpecialToken": {"id": text, "type_id": type_id}})
    return items


def _special_tokens(tokens: SpecialTokens | dict) -> dict[str, dict]:
    """``[(token, id), ...]``, ``{token: id}`` or tokenizer.json's
    ``{name: {"id", "ids", "tokens"}}``, as the last."""
    if isinstance(tokens, Mapping):
        items = list(tokens.items())
    else:
        items = list(tokens)
    out: dict[str, dict] = {}
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"special_tokens: {item!r} is not a (token, id) pair")
        name, value = item
        if isinstance(value, Mapping):
            out[name] = {"id": value["id"], "ids": list(value["ids"]), "tokens": list(value["tokens"])}
        else:
            out[name] = {"id": name, "ids": [_token((name, value), "special_tokens")[1]], "tokens": [name]}
    return out
