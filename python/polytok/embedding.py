r"""The embedding stage of a Transformer, fed by polytok's encoders: token
vectors and their positions, in NumPy (float32).

Notation: ``d`` is the vector width (``d_model`` for token vectors and
added positions, the head dimension for RoPE), ``i = 0 … d/2 − 1``, ``m``
and ``n`` are positions.

* **Token embedding**: a table ``E`` of shape (vocab_size, d); token ``t``
  becomes ``E[t]``, times ``√d`` when ``scale=True`` (as in Vaswani et al.
  2017). The table starts as N(0, σ²) from a seed, σ = d^-1/2 by default.
* **Sinusoidal positions** (Vaswani et al. 2017), added to the token vectors:
  PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
  With ω_i = 10000^(−2i/d), each offset k has one matrix M_k with
  PE(pos + k) = M_k · PE(pos) for every pos: block diagonal, blocks
  [[cos kω_i, sin kω_i], [−sin kω_i, cos kω_i]].
* **Learned positions**: a trained table P of shape (max_length, d), added;
  a sequence longer than max_length is an error.
* **RoPE** (Su et al. 2021), applied to query and key vectors in attention,
  in the rotate-half form (the two halves x = [x₁, x₂] pair up), O(d) per
  vector: with θ_i = base^(−2i/d),
  RoPE(x, m) = [x₁ cos mθ − x₂ sin mθ, x₂ cos mθ + x₁ sin mθ],
  so ⟨RoPE(q, m), RoPE(k, n)⟩ depends on q, k and m − n only.
  Context extension by a factor s from the trained length L:

  - ``linear`` (position interpolation, Chen et al. 2023): θ_i / s;
  - ``ntk`` (NTK-aware): base' = base · s^(d/(d−2));
  - ``dynamic`` (dynamic NTK): for a sequence of ℓ > L positions,
    base' = base · (s·ℓ/L − (s − 1))^(d/(d−2)); ℓ ≤ L keeps the base
    (transformers' ``dynamic`` rope type);
  - ``yarn`` (Peng et al. 2023, "YaRN"), NTK-by-parts: dimension i
    completes r_i = L·θ_i / 2π turns over the trained context. Dimensions
    with many turns (r ≥ β, ``beta_fast`` = 32) keep θ_i, those with few
    (r ≤ α, ``beta_slow`` = 1) are interpolated to θ_i / s, and between
    them θ'_i = (1 − γ_i)·θ_i/s + γ_i·θ_i. Like the YaRN authors' code and
    transformers' ``_compute_yarn_parameters`` (what YaRN checkpoints were
    trained with), the ramp γ is linear in the dimension index i, between
    i_β = ⌊D(β)⌋ and i_α = ⌈D(α)⌉ with D(r) = d·ln(L / 2πr) / (2 ln base),
    clipped to [0, d − 1]; the paper writes γ as linear in r, which it
    equals only at the ends of the ramp. The attention temperature
    √(1/t) = 0.1·ln s + 1 multiplies cos and sin, so that the attention
    logits q·k are multiplied by 1/t.

* **ALiBi** (Press et al. 2022): no position vectors; head h adds
  −slope_h · |i − j| to the attention score of query i and key j. For
  n = 2^k heads the slopes are the geometric sequence 2^(−8/n·(h+1)),
  h = 0 … n − 1 (1/2 … 1/256 for 8 heads); for other head counts, the
  slopes of the nearest power of two below, n, followed by every other
  slope of 2n heads, as many as are missing (the paper's rule).
* **Long-term decay of RoPE** (Men et al. 2024, "Base of RoPE Bounds
  Context Length"): for q = k + noise, the expected advantage of the
  similar key over a random one at distance m is proportional to
  B(m) = Σ_i cos(m·θ_i). :func:`rope_base_lower_bound` finds the smallest
  base for which B(m) ≥ 0 for every m = 0 … L.
"""

from __future__ import annotations

import io
import math
import operator
import os
from collections.abc import Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np

from polytok import _core
from polytok._files import atomic_write

PathLike = str | os.PathLike
IdBatch = Sequence[int] | Sequence[Sequence[int]] | np.ndarray
ROPE_SCALINGS = ("linear", "ntk", "dynamic", "yarn")


class HasVocabSize(Protocol):
    """Any polytok tokenizer (or anything with a ``vocab_size``)."""

    @property
    def vocab_size(self) -> int: ...


class Embedded(NamedTuple):
    """The output of :meth:`TokenEmbedding.embed`."""

    vectors: np.ndarray
    """float32, (batch, sequence, d_model); zero at padded positions."""
    attention_mask: np.ndarray
    """bool, (batch, sequence); True for real tokens, False for padding."""


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _even_head_dim(head_dim: object) -> int:
    head_dim = _positive_int(head_dim, "head_dim")
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head dimension (its halves pair up), got head_dim={head_dim}")
    return head_dim


def pad_batch(ids: IdBatch, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ids as polytok's ``encode`` (one list) or ``encode_batch`` (a list of
    lists of any lengths) return them, as an int64 array (batch, longest)
    padded at the end with ``pad_id``, and the boolean attention mask
    (True for real tokens). One list, or a 1-D array, is a batch of one;
    so is an empty list (the encoding of an empty text)."""
    if isinstance(ids, Mapping) and "ids" in ids:
        # Tokenizer.encode_batch_numpy's arrays, already padded.
        batch = np.atleast_2d(np.asarray(ids["ids"])).astype(np.int64)
        mask = np.atleast_2d(np.asarray(ids.get("attention_mask", np.ones(batch.shape)))).astype(bool)
        return batch, mask
    if isinstance(ids, _core.Encoding) or (isinstance(ids, Sequence) and ids and isinstance(ids[0], _core.Encoding)):
        # Encodings: their ids, with their own padding masked too.
        encodings = [ids] if isinstance(ids, _core.Encoding) else list(ids)
        batch, mask = pad_batch([e.ids for e in encodings], pad_id)
        attention, _ = pad_batch([e.attention_mask for e in encodings], 0)
        return batch, mask & attention.astype(bool)
    if isinstance(ids, np.ndarray):
        if ids.dtype.kind not in "iu":
            raise TypeError(f"token ids must be integers, got an array of {ids.dtype}")
        if ids.ndim not in (1, 2):
            raise ValueError(f"token ids must be one sequence or a batch (1 or 2 dimensions), got shape {ids.shape}")
        batch = np.atleast_2d(ids).astype(np.int64, copy=False)
        return batch, np.ones(batch.shape, dtype=bool)
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise TypeError(f"token ids must be a list of ints or a list of lists of ints, got {type(ids).__name__}")
    if len(ids) == 0 or not isinstance(ids[0], (Sequence, np.ndarray)) or isinstance(ids[0], (str, bytes)):
        ids = [ids]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    longest = int(lengths.max(initial=0))
    mask = np.arange(longest) < lengths[:, None]
    try:
        # operator.index refuses floats, which int64 conversion would truncate.
        flat = np.fromiter(map(operator.index, chain.from_iterable(ids)), dtype=np.int64, count=int(lengths.sum()))
    except (TypeError, ValueError, OverflowError) as e:
        raise TypeError(f"token ids must be integers: {e}") from e
    batch = np.full(mask.shape, pad_id, dtype=np.int64)
    batch[mask] = flat
    return batch, mask


class SinusoidalPositions:
    """The fixed sinusoidal encodings of Vaswani et al. (2017), added to the
    token vectors: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) =
    cos(pos / base^(2i/d)), base = 10000."""

    def __init__(self, d_model: int, base: float = 10000.0) -> None:
        self.d_model = _positive_int(d_model, "d_model")
        if not base > 1:
            raise ValueError(f"the sinusoidal base must be greater than 1, got {base!r}")
        self.base = float(base)

    def encodings(self, length: int) -> np.ndarray:
        """PE for positions 0 … length − 1: float32 (length, d_model)."""
        angles = np.arange(length, dtype=np.float64)[:, None] / self.base ** (
            np.arange(0, self.d_model, 2, dtype=np.float64) / self.d_model
        )
        table = np.empty((length, self.d_model), dtype=np.float32)
        table[:, 0::2] = np.sin(angles)
        table[:, 1::2] = np.cos(angles[:, : self.d_model // 2])
        return table


class LearnedPositions:
    """A trained table of absolute position vectors, added to the token
    vectors. Initialised N(0, 0.02²) from a seed (GPT-2's and BERT's
    initialisation) unless ``weight`` (max_length, d_model) is given."""

    def __init__(self, max_length: int, d_model: int, *, seed: int | None = 0, weight: np.ndarray | None = None) -> None:
        self.max_length = _positive_int(max_length, "max_length")
        self.d_model = _positive_int(d_model, "d_model")
        if weight is None:
            weight = np.random.default_rng(seed).standard_normal((self.max_length, self.d_model), dtype=np.float32) * np.float32(0.02)
        weight = np.asarray(weight, dtype=np.float32)
        if weight.shape != (self.max_length, self.d_model):
            raise ValueError(f"learned position table has shape {weight.shape}, expected ({self.max_length}, {self.d_model})")
        self.weight = weight

    def encodings(self, length: int) -> np.ndarray:
        """The vectors of positions 0 … length − 1: float32 (length, d_model).
        ValueError past the table's ``max_length``."""
        if length > self.max_length:
            raise ValueError(
                f"a sequence of {length} tokens is longer than the learned position table "
                f"(max_length={self.max_length}): learned positions do not extrapolate"
            )
        return self.weight[:length]


AdditivePositions = SinusoidalPositions | LearnedPositions


def save_npy(path: PathLike, array: np.ndarray) -> None:
    """Write ``array`` to a ``.npy`` file atomically (temporary file, then
    rename)."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    atomic_write(path, buffer.getvalue())


class TokenEmbedding:
    """The token lookup table: ``vocab_size`` vectors of ``d_model`` floats.

    ``vocab_size`` may be a polytok tokenizer (its ``vocab_size`` is used).
    The table is drawn from N(0, std²) with ``std`` = d_model^-1/2 by
    default, from ``seed`` (the same seed gives the same table). With
    ``scale=True`` looked-up vectors are multiplied by √d_model.
    """

    def __init__(
        self,
        vocab_size: int | HasVocabSize,
        d_model: int,
        *,
        std: float | None = None,
        seed: int | None = 0,
        scale: bool = False,
    ) -> None:
        size = vocab_size if isinstance(vocab_size, (int, np.integer)) else getattr(vocab_size, "vocab_size", vocab_size)
        size = _positive_int(size, "vocab_size")
        d_model = _positive_int(d_model, "d_model")
        std = d_model**-0.5 if std is None else float(std)
        if not std > 0:
            raise ValueError(f"std must be positive, got {std!r}")
        weight = np.random.default_rng(seed).standard_normal((size, d_model), dtype=np.float32)
        weight *= np.float32(std)
        self._set(weight, scale)

    def _set(self, weight: np.ndarray, scale: bool) -> None:
        self.weight = weight
        self.scale = bool(scale)

    @classmethod
    def from_weights(cls, weight: np.ndarray, *, scale: bool = False) -> TokenEmbedding:
        """An embedding with the given table (vocab_size, d_model), as float32."""
        weight = np.asarray(weight)
        if weight.ndim != 2 or 0 in weight.shape:
            raise ValueError(f"an embedding table must be 2-D (vocab_size, d_model), got shape {weight.shape}")
        if weight.dtype.kind not in "fiu":
            raise TypeError(f"an embedding table must hold numbers, got {weight.dtype}")
        embedding = cls.__new__(cls)
        embedding._set(np.ascontiguousarray(weight, dtype=np.float32), scale)
        return embedding

    @classmethod
    def load(cls, path: PathLike, *, scale: bool = False) -> TokenEmbedding:
        """Load a table saved by :meth:`save`: a ``.npy`` array, or a
        ``.safetensors`` file with the tensor ``weight`` (or a single tensor
        of any name)."""
        path = Path(path)
        if path.suffix == ".npy":
            return cls.from_weights(np.load(path, allow_pickle=False), scale=scale)
        if path.suffix == ".safetensors":
            from safetensors.numpy import load_file

            tensors = load_file(path)
            if "weight" not in tensors and len(tensors) != 1:
                raise ValueError(f"{path}: no tensor named 'weight' among {sorted(tensors)}")
            return cls.from_weights(tensors.get("weight", next(iter(tensors.values()))), scale=scale)
        raise ValueError(f"{path}: embedding tables are .npy or .safetensors files")

    def save(self, path: PathLike) -> None:
        """Save the table atomically as ``.npy`` or ``.safetensors`` (tensor
        ``weight``), by the file's extension."""
        path = Path(path)
        if path.suffix == ".npy":
            save_npy(path, self.weight)
        elif path.suffix == ".safetensors":
            from safetensors.numpy import save

            atomic_write(path, save({"weight": self.weight}))
        else:
            raise ValueError(f"{path}: embedding tables are saved as .npy or .safetensors files")

    @property
    def vocab_size(self) -> int:
        """Rows of the table: the ids it can look up are 0 … vocab_size − 1."""
        return self.weight.shape[0]

    @property
    def d_model(self) -> int:
        """The width of each vector."""
        return self.weight.shape[1]

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """The vectors of an integer array of ids, any shape: float32 of
        shape ids.shape + (d_model,), times √d_model with ``scale``.
        ValueError naming the first id outside 0 … vocab_size − 1."""
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"token ids must be integers, got an array of {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            where = np.argwhere((ids < 0) | (ids >= self.vocab_size))[0]
            raise ValueError(
                f"token id {int(ids[tuple(where)])} at index {tuple(int(i) for i in where)} is outside the "
                f"vocabulary (0 … {self.vocab_size - 1})"
            )
        vectors = np.take(self.weight, ids, axis=0)
        if self.scale:
            vectors *= np.float32(math.sqrt(self.d_model))
        return vectors

    def embed(self, ids: IdBatch, *, positions: AdditivePositions | None = None, pad_id: int = 0) -> Embedded:
        """Token vectors for what a polytok tokenizer's ``encode`` (one
        Encoding), ``encode_batch`` (Encodings, or lists of any lengths) or
        ``encode_batch_numpy`` (padded arrays, taken as they are) returns, or
        a 1-D/2-D id array: sequences are padded at the end to the longest (with
        ``pad_id``, which is never looked up) and the vectors of
        ``positions`` (sinusoidal or learned) are added. Returns float32
        vectors (batch, sequence, d_model), zero where padded, and the
        attention mask. RoPE and ALiBi act inside attention instead: see
        :meth:`RoPE.apply` and :meth:`ALiBi.add_to`."""
        if positions is not None and not isinstance(positions, (SinusoidalPositions, LearnedPositions)):
            raise TypeError(
                f"positions added to token vectors are SinusoidalPositions or LearnedPositions, got "
                f"{type(positions).__name__} (RoPE and ALiBi act on attention: RoPE.apply(q), ALiBi.add_to(scores))"
            )
        if positions is not None and positions.d_model != self.d_model:
            raise ValueError(f"positions have d_model={positions.d_model}, the token embedding {self.d_model}")
        batch, mask = pad_batch(ids, pad_id)
        vectors = self.lookup(np.where(mask, batch, 0) if not mask.all() else batch)
        if positions is not None:
            vectors += positions.encodings(batch.shape[1])
        if not mask.all():
            vectors[~mask] = 0.0
        return Embedded(vectors, mask)


def yarn_attention_factor(factor: float) -> float:
    """YaRN's √(1/t) = 0.1·ln s + 1 for a scale factor s > 1 (1 for s ≤ 1):
    it multiplies cos and sin, so the attention logits by 1/t."""
    return 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0


def rope_frequencies(
    head_dim: int,
    base: float = 10000.0,
    *,
    scaling: str | None = None,
    factor: float = 1.0,
    original_context: int | None = None,
    seq_len: int | None = None,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
) -> np.ndarray:
    """RoPE's angular frequencies θ_i (float64, head_dim/2 of them), with
    the context extension ``scaling`` (None, "linear", "ntk", "dynamic",
    "yarn") by ``factor`` from a model trained on ``original_context``
    positions (needed by "dynamic" and "yarn"); "dynamic" also takes the
    current ``seq_len``. The formulas are in the module's docstring."""
    head_dim = _even_head_dim(head_dim)
    if not base > 1:
        raise ValueError(f"the RoPE base must be greater than 1, got {base!r}")
    exponents = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    if scaling is None:
        return base**-exponents
    if scaling not in ROPE_SCALINGS:
        raise ValueError(f"unknown RoPE scaling {scaling!r}: use one of {', '.join(ROPE_SCALINGS)} or None")
    if not factor >= 1:
        raise ValueError(f"a context-extension factor must be at least 1, got {factor!r}")
    if scaling == "linear":
        return base**-exponents / factor
    if scaling in ("ntk", "dynamic") and head_dim < 4:
        raise ValueError(f"{scaling} scaling raises the base to the power d/(d−2): it needs head_dim ≥ 4, got head_dim={head_dim}")
    if scaling == "ntk":
        return (base * factor ** (head_dim / (head_dim - 2))) ** -exponents
    if original_context is None:
        raise ValueError(f"{scaling} scaling needs original_context, the context length the model was trained on")
    original_context = _positive_int(original_context, "original_context")
    if scaling == "dynamic":
        length = max(seq_len or original_context, original_context)
        return (base * (factor * length / original_context - (factor - 1)) ** (head_dim / (head_dim - 2))) ** -exponents

    def correction_dim(turns: float) -> float:
        return head_dim * math.log(original_context / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), head_dim - 1)
    interpolated = np.clip((np.arange(head_dim // 2) - low) / ((high - low) or 0.001), 0.0, 1.0)
    theta = base**-exponents
    return theta / factor * interpolated + theta * (1.0 - interpolated)


class RoPE:
    """Rotary position embedding for vectors of ``head_dim`` (even) floats,
    with an optional context extension (see :func:`rope_frequencies`).

    >>> rope = RoPE(64, scaling="yarn", factor=4, original_context=2048)
    >>> q = rope.apply(np.ones((2, 12, 10, 64), dtype=np.float32))  # (batch, heads, seq, head_dim)
    """

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        *,
        scaling: str | None = None,
        factor: float = 1.0,
        original_context: int | None = None,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
        attention_factor: float | None = None,
    ) -> None:
        self.head_dim = _even_head_dim(head_dim)
        self.base = float(base)
        self.scaling = scaling
        self.factor = float(factor)
        self.original_context = original_context
        self.beta_fast = float(beta_fast)
        self.beta_slow = float(beta_slow)
        self.frequencies()  # Checks the settings now rather than at the first use.
        if attention_factor is None:
            attention_factor = yarn_attention_factor(self.factor) if scaling == "yarn" else 1.0
        self.attention_factor = float(attention_factor)

    def frequencies(self, seq_len: int | None = None) -> np.ndarray:
        """θ_i for a sequence of ``seq_len`` positions (which only dynamic
        NTK depends on)."""
        return rope_frequencies(
            self.head_dim, self.base, scaling=self.scaling, factor=self.factor,
            original_context=self.original_context, seq_len=seq_len,
            beta_fast=self.beta_fast, beta_slow=self.beta_slow,
        )

    def cos_sin(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """cos(m·θ_i) and sin(m·θ_i), times the attention factor, for each
        position m: two float32 arrays of shape positions.shape + (head_dim/2,)."""
        positions = np.asarray(positions)
        seq_len = int(positions.max()) + 1 if positions.size else 0
        angles = positions.astype(np.float64)[..., None] * self.frequencies(seq_len)
        return (
            (np.cos(angles) * self.attention_factor).astype(np.float32),
            (np.sin(angles) * self.attention_factor).astype(np.float32),
        )

    def apply(self, x: np.ndarray, positions: np.ndarray | Sequence[int] | None = None) -> np.ndarray:
        """Rotate ``x`` (..., seq, head_dim), each vector by its position
        (``positions``, one per sequence index; 0 … seq − 1 by default), in
        the rotate-half form: a new float32 array of the same shape."""
        x = np.asarray(x, dtype=np.float32)
        if x.ndim < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"RoPE expects vectors of shape (..., seq, {self.head_dim}), got shape {x.shape}")
        seq = x.shape[-2]
        positions = np.arange(seq) if positions is None else np.asarray(positions)
        if positions.shape != (seq,) or positions.dtype.kind not in "iu":
            raise ValueError(f"positions must be {seq} integers (one per sequence index), got shape {positions.shape} of {positions.dtype}")
        if seq and positions.min() < 0:
            raise ValueError(f"positions must not be negative, got {int(positions.min())}")
        cos, sin = self.cos_sin(positions)
        half = self.head_dim // 2
        x1, x2 = x[..., :half], x[..., half:]
        out = np.empty(x.shape, dtype=np.float32)
        first, second = out[..., :half], out[..., half:]
        np.multiply(x1, cos, out=first)
        first -= x2 * sin
        np.multiply(x2, cos, out=second)
        second += x1 * sin
        return out

    def long_term_decay(self, max_distance: int) -> np.ndarray:
        """B(m) = Σ_i cos(m·θ_i) for relative distances m = 0 … max_distance
        (float64), with this RoPE's frequencies at a sequence of
        max_distance + 1 positions: Men et al.'s long-term decay, which is
        d/2 at m = 0."""
        return _long_term_decay(np.arange(max_distance + 1, dtype=np.float64), self.frequencies(max_distance + 1))


def _long_term_decay(distances: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """B(m) = Σ_i cos(m·θ_i), for every distance (rows) and frequency set
    ``theta`` (last axis), in float64."""
    return np.cos(distances[..., None] * theta).sum(axis=-1)


def alibi_slopes(num_heads: int) -> np.ndarray:
    """ALiBi's per-head slopes (float64): for n = 2^k heads the geometric
    sequence 2^(−8(h+1)/n); otherwise those of the nearest power of two
    below, n, then every other slope of 2n heads, as many as are missing."""
    num_heads = _positive_int(num_heads, "num_heads")
    power = 2 ** int(math.floor(math.log2(num_heads)))

    def geometric(n: int) -> np.ndarray:
        return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)

    return np.concatenate([geometric(power), geometric(2 * power)[0::2][: num_heads - power]])


class ALiBi:
    """Attention with linear biases: head h adds −slope_h · |i − j| to the
    score of query i and key j (no position vectors at all)."""

    def __init__(self, num_heads: int) -> None:
        self.slopes = alibi_slopes(num_heads)

    @property
    def num_heads(self) -> int:
        """One slope per attention head."""
        return len(self.slopes)

    def bias(self, query_length: int, key_length: int | None = None) -> np.ndarray:
        """The distance-bias matrices, float32 (num_heads, query_length,
        key_length). Queries are the last ``query_length`` of the
        ``key_length`` positions (decoding with a cache); in a causal model
        the keys after a query are masked anyway."""
        key_length = query_length if key_length is None else key_length
        if query_length > key_length:
            raise ValueError(f"query_length {query_length} is longer than key_length {key_length}")
        query_positions = np.arange(key_length - query_length, key_length)
        distance = np.abs(query_positions[:, None] - np.arange(key_length)[None, :])
        return (-self.slopes[:, None, None] * distance).astype(np.float32)

    def add_to(self, scores: np.ndarray) -> np.ndarray:
        """Attention scores (..., num_heads, query_length, key_length) plus
        their biases: a new float32 array."""
        scores = np.asarray(scores, dtype=np.float32)
        if scores.ndim < 3 or scores.shape[-3] != self.num_heads:
            raise ValueError(f"ALiBi expects scores of shape (..., {self.num_heads}, queries, keys), got shape {scores.shape}")
        return scores + self.bias(scores.shape[-2], scores.shape[-1])


#: The longest context ``rope_base_lower_bound`` searches for (2^20).
MAX_BOUND_CONTEXT = 1 << 20


def rope_base_lower_bound(context_length: int, head_dim: int, *, grid_step: float = 1e-3, rtol: float = 1e-6) -> float:
    r"""The smallest RoPE base b for which the long-term decay term
    B(m) = Σ_{i<d/2} cos(m·b^(−2i/d)) stays non-negative for every integer
    distance m = 0 … context_length (Men et al. 2024, "Base of RoPE Bounds
    Context Length": the model's ability to attend more to a similar token
    than to a random one at distance m is proportional to B(m), and the
    paper's lower bound of the base for a context length L is the smallest
    base with B(m) ≥ 0 on [0, L]). With head_dim = 128 this gives the
    paper's values for L = 1024, 4096, 8192, 65,536 and 131,072 (4.3e3,
    2.7e4, 8.4e4, 2.1e6, 7.8e6), and smaller bases for some other lengths
    (1.16e4 for 2048, 2.34e5 for 16,384), found in narrow intervals of
    working bases (see below).

    **The criterion is not monotone in the base.** Bases that satisfy it
    come in intervals, often only ~0.5% wide near the bound, separated by
    bases that fail (for head_dim = 128 and L = 2048 the smallest base
    that works is ~1.16e4, but bases up to ~2.3e4 fail again), so a plain
    bisection over the base would be wrong. The search scans the bases
    b_k = (1 + grid_step)^k upwards and returns the first that works,
    refined by bisection (to relative precision ``rtol``) between it and
    the base before it, which fails: the result satisfies the criterion,
    and a base a factor (1 − rtol) smaller does not. An interval of working
    bases narrower than ``grid_step`` (relative) below it can be missed;
    make ``grid_step`` smaller to look closer.

    Each base is first tested at the distances (± 16) where recent bases
    failed, which rejects most bases in O(d) work, 256 bases at a time;
    only a base that passes them has all its L + 1 distances checked
    (vectorized, in chunks that stop at the first negative B). Measured
    with head_dim = 128 on one core: about 2 s for L = 2048, 10 s for
    32,768 and 75 s for 131,072.
    """
    context_length = _positive_int(context_length, "context_length")
    if context_length > MAX_BOUND_CONTEXT:
        raise ValueError(
            f"context_length must be at most {MAX_BOUND_CONTEXT:,} (every distance is checked: "
            f"131,072 takes about a minute), got {context_length:,}"
        )
    head_dim = _even_head_dim(head_dim)
    if head_dim > 65_536:
        raise ValueError(f"head_dim must be at most 65,536, got {head_dim:,}")
    if not 0 < grid_step < 1 or not 0 < rtol < grid_step:
        raise ValueError(f"need 0 < rtol < grid_step < 1, got grid_step={grid_step!r}, rtol={rtol!r}")
    exponents = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    window = np.arange(-16, 17)
    witnesses = np.empty(0)  # Distances (± window) where earlier bases failed.

    def fails_at_witnesses(bases: np.ndarray) -> np.ndarray:
        if not witnesses.size:
            return np.zeros(len(bases), dtype=bool)
        theta = bases[:, None] ** -exponents
        return (_long_term_decay(witnesses, theta[:, None, :]) < 0).any(axis=1)

    def negative_distances(base: float) -> np.ndarray:
        """Where B first goes negative and its lowest point in that chunk
        (the dip that nearby bases most likely share); empty if nowhere."""
        theta = base**-exponents
        chunk, start = 512, 0
        while start <= context_length:
            decay = _long_term_decay(np.arange(start, min(start + chunk, context_length + 1), dtype=np.float64), theta)
            negative = np.flatnonzero(decay < 0)
            if negative.size:
                return start + np.array([negative[0], np.argmin(decay)])
            start += chunk
            chunk = min(2 * chunk, 1 << 14)
        return np.empty(0, dtype=np.int64)

    def works(base: float) -> bool:
        nonlocal witnesses
        if fails_at_witnesses(np.array([base]))[0]:
            return False
        failed_at = negative_distances(base)
        if not failed_at.size:
            return True
        recent = np.concatenate([witnesses[-30 * window.size :], np.add.outer(failed_at, window).ravel()])
        witnesses = np.clip(recent, 0, context_length).astype(np.float64)
        return False

    log_step = math.log1p(grid_step)
    previous = 1.0
    for block_start in range(1, 1 << 30, 256):
        bases = np.exp(log_step * np.arange(block_start, block_start + 256))
        rejected = fails_at_witnesses(bases)
        for k, base in enumerate(bases):
            if not rejected[k] and works(base):
                low, high = (bases[k - 1] if k else previous), base
                while high / low - 1 > rtol:
                    middle = math.sqrt(low * high)
                    low, high = (low, middle) if works(middle) else (middle, high)
                return float(high)
        previous = bases[-1]
    raise AssertionError("unreachable: large enough bases always satisfy the criterion")
