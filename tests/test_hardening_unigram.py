"""SentencePiece ``.model`` files (issue 17, items 6 and 7): every setting a
model carries that changes encoding or decoding (the normalizer's whitespace
switches, ``treat_whitespace_as_suffix``, byte fallback, ``unk_surface``)
gives sentencepiece's ids and decoded text, in every combination; and every
file sentencepiece refuses is refused with a ``ValueError`` naming it: a
seeded fuzz target over mutations of real models (truncations, byte flips,
edits of protobuf fields) compares polytok's accept/refuse with
sentencepiece's, and the encodings where both accept.

Models are edited at the protobuf wire level (a few lines below), which
needs no ``protobuf`` package."""

from __future__ import annotations

import io
import itertools
import math
import random
import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from conftest import CORPORA

spm = pytest.importorskip("sentencepiece")

# ----------------------------------------------------------- protobuf wire

VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5
# ModelProto's fields, and those of its messages that the tests edit.
PIECE, TRAINER, NORMALIZER, SELF_TEST, DENORMALIZER = 1, 2, 3, 4, 5
PIECE_TEXT, PIECE_SCORE, PIECE_TYPE = 1, 2, 3
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
MODEL_TYPE, TREAT_WHITESPACE_AS_SUFFIX, BYTE_FALLBACK, UNK_SURFACE = 3, 24, 35, 44
NAME, CHARSMAP, ADD_DUMMY_PREFIX, REMOVE_EXTRA_WHITESPACES, ESCAPE_WHITESPACES = 1, 2, 3, 4, 5


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def parse(data: bytes) -> list[list]:
    """A message's fields, in order, as [number, wire type, value]."""
    fields, at = [], 0
    while at < len(data):
        key, at = read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, at = read_varint(data, at)
        elif wire == BYTES:
            size, at = read_varint(data, at)
            value, at = data[at : at + size], at + size
        else:
            size = {FIXED64: 8, FIXED32: 4}[wire]
            value, at = data[at : at + size], at + size
        fields.append([number, wire, value])
    return fields


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def serialize(fields: list[list]) -> bytes:
    out = bytearray()
    for number, wire, value in fields:
        out += varint(number << 3 | wire)
        if wire == VARINT:
            out += varint(value)
        elif wire == BYTES:
            out += varint(len(value)) + value
        else:
            out += value
    return bytes(out)


def field(number: int, value: bool | int | float | str | bytes) -> list:
    """A field as `parse` gives it: ints and bools as varints, floats as
    32 bits, strings as UTF-8."""
    if isinstance(value, float):
        return [number, FIXED32, struct.pack("<f", value)]
    if isinstance(value, str):
        return [number, BYTES, value.encode("utf-8", "surrogatepass")]
    if isinstance(value, bytes):
        return [number, BYTES, value]
    return [number, VARINT, int(value)]


def set_fields(fields: list[list], values: dict[int, object]) -> list[list]:
    """`fields` with those of `values` replaced (None: removed)."""
    kept = [f for f in fields if f[0] not in values]
    return kept + [field(n, v) for n, v in values.items() if v is not None]


def edit(model: bytes, message: int, values: dict[int, object]) -> bytes:
    """`model` with fields of one of its messages (trainer, normalizer, ...)
    set, the message created if absent."""
    fields = parse(model)
    inner = next((parse(f[2]) for f in fields if f[0] == message), [])
    rest = [f for f in fields if f[0] != message]
    return serialize(rest + [[message, BYTES, serialize(set_fields(inner, values))]])


def edit_piece(model: bytes, index: int, values: dict[int, object]) -> bytes:
    fields = parse(model)
    at = [i for i, f in enumerate(fields) if f[0] == PIECE][index]
    fields[at][2] = serialize(set_fields(parse(fields[at][2]), values))
    return serialize(fields)


def only_control_pieces(model: bytes) -> bytes:
    """`model` with every piece but the unknown one a control piece."""
    fields = parse(model)
    for f in fields:
        if f[0] == PIECE and [PIECE_TYPE, VARINT, UNKNOWN] not in parse(f[2]):
            f[2] = serialize(set_fields(parse(f[2]), {PIECE_TYPE: CONTROL}))
    return serialize(fields)


def pieces_of(model: bytes) -> list[dict[int, object]]:
    """The pieces: {PIECE_TEXT: str, PIECE_TYPE: int}."""
    out = []
    for f in parse(model):
        if f[0] == PIECE:
            values = {n: v for n, _, v in parse(f[2])}
            out.append({PIECE_TEXT: values.get(PIECE_TEXT, b"").decode(), PIECE_TYPE: values.get(PIECE_TYPE, NORMAL)})
    return out


# ------------------------------------------------------------------ models


def train_sentencepiece(**options) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        input=",".join(str(CORPORA / name) for name in ("en.txt", "fr.txt")),
        model_writer=model,
        model_type="unigram",
        normalization_rule_name="identity",
        minloglevel=2,
        num_threads=1,  # the same model every run, for the seeded fuzz target
        **{"vocab_size": 500, **options},
    )
    return model.getvalue()


@pytest.fixture(scope="module")
def base_models() -> dict[str, bytes]:
    """Real models: a plain one with user-defined pieces, and one with byte
    fallback."""
    return {
        "plain": train_sentencepiece(user_defined_symbols=["<sep>", "ab c"]),
        "byte_fallback": train_sentencepiece(byte_fallback=True, character_coverage=0.98, vocab_size=700),
    }


def load_ours(data: bytes, tmp_path, name: str = "m.model"):
    path = tmp_path / name
    path.write_bytes(data)
    return polytok.SentencePieceTokenizer.from_sentencepiece(path)


def load_theirs(data: bytes):
    return spm.SentencePieceProcessor(model_proto=data)


# Whitespace settings: (remove_extra_whitespaces, add_dummy_prefix,
# escape_whitespaces, treat_whitespace_as_suffix), every combination.
SWITCHES = list(itertools.product([True, False], repeat=4))


def with_switches(model: bytes, switches: tuple[bool, bool, bool, bool]) -> bytes:
    remove_extra, dummy_prefix, escape, as_suffix = switches
    model = edit(model, NORMALIZER, {REMOVE_EXTRA_WHITESPACES: remove_extra, ADD_DUMMY_PREFIX: dummy_prefix, ESCAPE_WHITESPACES: escape})
    return edit(model, TRAINER, {TREAT_WHITESPACE_AS_SUFFIX: as_suffix})


def switch_id(switches) -> str:
    names = ("remove_extra", "dummy_prefix", "escape", "suffix")
    return "-".join(name if on else f"no_{name}" for name, on in zip(names, switches))


@pytest.fixture(scope="module")
def switched_models(base_models, tmp_path_factory):
    """(polytok, sentencepiece) by (base model, switches), made on demand."""
    directory = tmp_path_factory.mktemp("switched")
    made = {}

    def get(base: str, switches):
        if (base, switches) not in made:
            data = with_switches(base_models[base], switches)
            made[base, switches] = (load_ours(data, directory, f"{base}-{switch_id(switches)}.model"), load_theirs(data))
        return made[base, switches]

    return get


def assert_same(ours, theirs, texts: list[str]) -> None:
    """Equal ids, and equal decodings of them, for every text."""
    their_ids = theirs.encode(texts)
    assert ours.encode_batch(texts) == their_ids
    for text, ids in zip(texts, their_ids):
        assert ours.encode(text) == ids, text
        assert ours.decode(ids) == theirs.decode(ids), (text, ids)


# ------------------------------------------------ item 6: the reproducers


def test_without_removing_extra_whitespace_as_sentencepiece(tmp_path):
    """A model trained with ``remove_extra_whitespaces=False`` encoded ""
    as [▁], and decoded " a" as "a" and "  x  y" as "x  y"."""
    data = train_sentencepiece(remove_extra_whitespaces=False)
    ours, theirs = load_ours(data, tmp_path), load_theirs(data)
    assert ours.encode("") == theirs.encode("") == []
    for text in [" a", "  x  y", "a  ", " ", "a b  c "]:
        ids = ours.encode(text)
        assert ids == theirs.encode(text)
        assert ours.decode(ids) == theirs.decode(ids) == text


# -------------------------------------- item 6: every setting, every text

whitespace_texts = st.lists(st.sampled_from(["a", " ", "\t", "\n", "▁", "é", "  ", ""]), max_size=12).map("".join)


@pytest.mark.parametrize("switches", SWITCHES, ids=switch_id)
@pytest.mark.parametrize("base", ["plain", "byte_fallback"])
@settings(max_examples=120, deadline=None)
@given(text=whitespace_texts)
def test_switches_on_adversarial_whitespace(switched_models, base, switches, text):
    ours, theirs = switched_models(base, switches)
    ids = ours.encode(text)
    assert ids == theirs.encode(text)
    assert ours.decode(ids) == theirs.decode(ids)


FLORES_LANGUAGES = ("eng_Latn", "fra_Latn", "deu_Latn", "vie_Latn", "rus_Cyrl", "ell_Grek", "arb_Arab", "heb_Hebr", "hin_Deva", "tha_Thai", "zho_Hans", "jpn_Jpan")


def spaced_out(line: str, rng: random.Random) -> str:
    """`line` with runs of spaces, tabs and `▁` at its ends and between words."""
    words = line.split(" ")
    gaps = [rng.choice([" ", "  ", "   ", " \t ", "▁", " ▁ "]) for _ in words]
    return rng.choice(["", " ", "  "]) + "".join(w + g for w, g in zip(words, gaps))


@pytest.mark.parametrize("switches", SWITCHES, ids=switch_id)
def test_switches_on_flores(flores, switched_models, switches):
    rng = random.Random(17)
    lines = [line for language in FLORES_LANGUAGES if language in flores for line in flores[language][:150]]
    assert len(lines) >= 1500
    texts = lines + [spaced_out(line, rng) for line in lines]
    for base in ("plain", "byte_fallback"):
        assert_same(*switched_models(base, switches), texts)


def test_unknown_surface(base_models, tmp_path):
    data = edit(base_models["plain"], TRAINER, {UNK_SURFACE: "<?>"})
    ours, theirs = load_ours(data, tmp_path), load_theirs(data)
    ids = ours.encode("ꙮ a ꙮꙮ")
    assert ids == theirs.encode("ꙮ a ꙮꙮ")
    assert ours.decode(ids) == theirs.decode(ids) == "<?> a <?>"


def test_settings_survive_polytok_json(base_models, tmp_path):
    """A model with unusual settings, saved as polytok JSON and as a
    ``.model`` again, still encodes and decodes as sentencepiece."""
    data = edit(with_switches(base_models["byte_fallback"], (False, True, True, True)), TRAINER, {UNK_SURFACE: "?"})
    theirs = load_theirs(data)
    ours = load_ours(data, tmp_path)
    ours.save(tmp_path / "m.polytok")
    ours.save_sentencepiece(tmp_path / "again.model")
    texts = ["", " a", "  x  y ", "a▁b", "ꙮ\tz", "two  spaces"]
    for reloaded in (polytok.UnigramTokenizer.load(tmp_path / "m.polytok"), polytok.UnigramTokenizer.from_sentencepiece(tmp_path / "again.model")):
        assert_same(reloaded, theirs, texts)
    assert_same(ours, load_theirs((tmp_path / "again.model").read_bytes()), texts)


@pytest.mark.parametrize("remove_extra_whitespaces,add_dummy_prefix", [(True, False), (False, True), (False, False)])
def test_polytok_trained_models_in_sentencepiece(tmp_path, remove_extra_whitespaces, add_dummy_prefix):
    """polytok's trainer with other whitespace settings writes ``.model``
    files that sentencepiece loads and encodes and decodes the same."""
    lines = (CORPORA / "en.txt").read_text("utf-8").splitlines()
    ours = polytok.UnigramTokenizer.train_from_iterator(
        lines, vocab_size=400, byte_fallback=True, remove_extra_whitespaces=remove_extra_whitespaces,
        add_dummy_prefix=add_dummy_prefix, progress=False,
    )
    ours.save_sentencepiece(tmp_path / "p.model")
    theirs = spm.SentencePieceProcessor(model_file=str(tmp_path / "p.model"))
    rng = random.Random(6)
    texts = lines[:200] + [spaced_out(line, rng) for line in lines[:200]] + ["", " ", " a", "  x  y", "▁"]
    assert_same(ours, theirs, texts)
    assert_same(polytok.UnigramTokenizer.from_sentencepiece(tmp_path / "p.model"), theirs, texts)


# ---------------------------------- item 7: refuse what sentencepiece does


def refusal(data: bytes, tmp_path) -> str | None:
    """polytok's error for a file (None: loaded); anything but a ValueError
    naming the file fails the test."""
    path = tmp_path / "fuzzed.model"
    path.write_bytes(data)
    try:
        polytok.SentencePieceTokenizer.from_sentencepiece(path)
    except ValueError as e:
        assert str(e).startswith(f"{path}: "), e
        return str(e)
    return None


def refused_by_sentencepiece(data: bytes) -> bool:
    try:
        load_theirs(data)
    except Exception:  # RuntimeError, or UnicodeDecodeError when its message quotes bad UTF-8
        return True
    return False


def test_truncations_refused(base_models, tmp_path):
    """Truncations of a real model that sentencepiece refuses (some parse
    as a smaller model without the trainer's settings: then its byte pieces
    are there without byte fallback) are refused, not loaded as a smaller
    model."""
    data = base_models["byte_fallback"]
    rng = random.Random(7)
    # Ends of pieces, where a truncated file still parses, and any lengths.
    ends, at = [], 0
    for number, wire, value in parse(data):
        at += len(serialize([[number, wire, value]]))
        ends.append(at)
    lengths = rng.sample(ends[3:-2], 20) + [rng.randrange(len(data)) for _ in range(40)]
    refused = 0
    for length in lengths:
        if refused_by_sentencepiece(data[:length]):
            assert refusal(data[:length], tmp_path), length
            refused += 1
    assert refused >= 50


@pytest.mark.parametrize(
    "base,mutation,message",
    [
        ("byte_fallback", lambda m: edit(m, TRAINER, {BYTE_FALLBACK: False}), "byte fallback is off"),
        ("plain", lambda m: edit(m, TRAINER, {BYTE_FALLBACK: True}), "byte piece <0x00> is missing"),
        ("byte_fallback", lambda m: edit_piece(m, 3 + 0x4A, {PIECE_TEXT: "<0x4a>"}), "not <0xHH>"),
        ("plain", lambda m: edit_piece(m, 0, {PIECE_TYPE: NORMAL}), "no unknown piece"),
        ("plain", lambda m: edit_piece(m, 5, {PIECE_TYPE: UNKNOWN}), "more than one unknown piece"),
        ("plain", lambda m: edit_piece(m, 6, {PIECE_TEXT: pieces_of(m)[7][PIECE_TEXT]}), "are both"),
        ("plain", lambda m: edit_piece(m, 6, {PIECE_TEXT: ""}), "is empty"),
        ("plain", lambda m: edit_piece(m, 6, {PIECE_TEXT: "a\0b"}), "NUL"),
        ("plain", lambda m: edit_piece(m, 6, {PIECE_SCORE: math.nan}), "score NaN"),
        ("plain", lambda m: edit_piece(m, 6, {PIECE_SCORE: -math.inf}), "score -inf"),
        ("plain", lambda m: only_control_pieces(m), "no piece to encode with"),
        ("plain", lambda m: m[: len(m) // 2], "not a SentencePiece model"),
        ("plain", lambda m: edit(m, DENORMALIZER, {NAME: "x", CHARSMAP: b"\1\2\3\4\5"}), "denormalizes"),
    ],
)
def test_inconsistent_models_refused(base_models, tmp_path, base, mutation, message):
    data = mutation(base_models[base])
    assert refused_by_sentencepiece(data)
    error = refusal(data, tmp_path)
    assert error and message in error, error


# ------------------------------------------------------------ fuzz target

# Why polytok may refuse a file that sentencepiece loads: a number that is
# no model or piece type (sentencepiece reads the default), a string that is
# not UTF-8 or a field of the wrong wire type (protobuf's C++ parser keeps
# them as unknown fields), one text as pieces of two kinds, a damaged
# charsmap (which sentencepiece reads without a check), denormalization
# rules, user-defined pieces with runs of spaces that sentencepiece would
# keep.
POLYTOK_ONLY_REFUSALS = re.compile(
    "which polytok does not support \\(only Unigram and BPE\\)|has the unknown type|not a SentencePiece model: |are both|precompiled charsmap"
    "|denormalizes|two spaces in a row"
)

FUZZ_TEXTS = ["Hello world, naïve café.", "  two  spaces  ", "", "ꙮ x ▁ y\t", "<sep> ab c <0x41> 123"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random mutation of a model: a truncation, byte flips, or an edit
    of a piece, of the trainer's or normalizer's settings, or of the model's
    fields."""
    kind = rng.choice(["truncate", "flip", "piece", "piece", "piece", "trainer", "normalizer", "message"])
    try:
        fields = parse(data)
        texts = [p[PIECE_TEXT] for p in pieces_of(data)]
    except (IndexError, KeyError, UnicodeDecodeError):
        kind = "flip"  # no longer a message to edit (a second mutation)
    if kind == "truncate":
        return data[: rng.randrange(len(data))]
    if kind == "flip":
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            flipped[rng.randrange(len(flipped))] ^= rng.randint(1, 255)
        return bytes(flipped)
    piece_at = [i for i, f in enumerate(fields) if f[0] == PIECE]
    if kind == "piece":
        at = rng.choice(piece_at[:8] + rng.sample(piece_at, min(8, len(piece_at))))
        change = rng.choice(["type", "text", "score", "remove", "drop", "copy"])
        if change == "remove":
            del fields[at]
        elif change == "copy":
            fields.insert(rng.randrange(len(fields)), list(fields[at]))
        else:
            number, value = {
                "type": (PIECE_TYPE, rng.randint(0, 7)),
                "text": (PIECE_TEXT, rng.choice(["", "\0", "x\0", "<0x4a>", "<0x41>", "<0xZZ>", "<unk>", "<s>", " ", "▁ab", "a b", "x  y", rng.choice(texts)])),
                "score": (PIECE_SCORE, rng.choice([math.nan, math.inf, 0.0, 5.0, -1e30, rng.uniform(-20, 0)])),
                "drop": (rng.choice([PIECE_TEXT, PIECE_SCORE, PIECE_TYPE]), None),
            }[change]
            fields[at][2] = serialize(set_fields(parse(fields[at][2]), {number: value}))
        return serialize(fields)
    if kind == "trainer":
        number, value = rng.choice([
            (MODEL_TYPE, rng.randint(0, 5)),
            (BYTE_FALLBACK, rng.random() < 0.5),
            (TREAT_WHITESPACE_AS_SUFFIX, True),
            (UNK_SURFACE, rng.choice(["", "?", " <unk> "])),
            (25, True),  # split_digits
            (22, False),  # split_by_whitespace
            (40, rng.randint(-1, 5)),  # unk_id
            (4, rng.randint(1, 10**6)),  # vocab_size
        ])
        return edit(data, TRAINER, {number: value})
    if kind == "normalizer":
        number, value = rng.choice([
            (ADD_DUMMY_PREFIX, rng.random() < 0.5),
            (REMOVE_EXTRA_WHITESPACES, rng.random() < 0.5),
            (ESCAPE_WHITESPACES, rng.random() < 0.5),
            (NAME, rng.choice(["nmt_nfkc", "identity", ""])),
            (CHARSMAP, rng.choice([b"", bytes(rng.randrange(256) for _ in range(12))])),
        ])
        return edit(data, NORMALIZER, {number: value})
    # The model's own fields: a message removed, or one added.
    number = rng.choice([TRAINER, NORMALIZER, SELF_TEST, DENORMALIZER, 6, 200])
    if rng.random() < 0.5 and number in (TRAINER, NORMALIZER):
        return serialize([f for f in fields if f[0] != number])
    payload = rng.choice([b"", b"\xff\xff", serialize([field(CHARSMAP, b"\1\2\3\4\5")]), serialize([field(1, serialize([field(1, "a"), field(2, "b")]))])])
    return serialize(fields + [[number, BYTES, payload]])


def test_fuzz_model_files(base_models, tmp_path):
    """Mutations of real models (seeded: the same every run): whenever
    sentencepiece refuses one, polytok raises a ValueError naming the file;
    whenever both load it, they encode and decode a few texts alike; when
    only polytok refuses, for one of the reasons above."""
    rng = random.Random(2024)
    outcomes = {"both refuse": 0, "both load": 0, "polytok refuses": 0}
    for round in range(400):
        data = base_models[rng.choice(["plain", "byte_fallback"])]
        for _ in range(1 if rng.random() < 0.8 else 2):
            data = mutate(data, rng)
        theirs_refuse = refused_by_sentencepiece(data)
        error = refusal(data, tmp_path)
        if theirs_refuse:
            assert error, f"round {round}: sentencepiece refuses, polytok loads"
            outcomes["both refuse"] += 1
        elif error:
            assert POLYTOK_ONLY_REFUSALS.search(error), f"round {round}: {error}"
            outcomes["polytok refuses"] += 1
        else:
            ours, theirs = load_ours(data, tmp_path), load_theirs(data)
            assert_same(ours, theirs, FUZZ_TEXTS)
            outcomes["both load"] += 1
    assert outcomes["both refuse"] >= 100 and outcomes["both load"] >= 100, outcomes
