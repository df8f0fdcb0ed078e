"""The embedding stage: token vectors, sinusoidal and learned positions, RoPE
with its context extensions, ALiBi, and the RoPE base bound, checked against
their formulas, against PyTorch (when installed) and transformers' RoPE
parameters (when installed), and on bad input."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.cli import main
from polytok.embedding import (
    ALiBi,
    LearnedPositions,
    RoPE,
    SinusoidalPositions,
    TokenEmbedding,
    alibi_slopes,
    pad_batch,
    rope_base_lower_bound,
    rope_frequencies,
    yarn_attention_factor,
)

SCALE_FACTORS = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0)


@pytest.fixture(scope="module")
def tokenizer() -> polytok.BPETokenizer:
    return polytok.BPETokenizer.train_from_iterator(["low lower lowest newer newest"] * 50, vocab_size=300)


def torch_or_skip():
    return pytest.importorskip("torch", reason="PyTorch is not installed: the NumPy results are not compared with it")


# --------------------------------------------------------------- token table


def test_seeded_table_and_vocab_size_from_a_tokenizer(tokenizer):
    a = TokenEmbedding(tokenizer, 64, seed=7)
    assert a.weight.shape == (tokenizer.vocab_size, 64) and a.weight.dtype == np.float32
    assert np.array_equal(a.weight, TokenEmbedding(tokenizer.vocab_size, 64, seed=7).weight)
    assert not np.array_equal(a.weight, TokenEmbedding(tokenizer, 64, seed=8).weight)
    big = TokenEmbedding(1000, 256, seed=0)
    assert big.weight.std() == pytest.approx(256**-0.5, rel=0.02)
    assert TokenEmbedding(1000, 256, std=0.02).weight.std() == pytest.approx(0.02, rel=0.02)


def test_embed_takes_encode_and_encode_batch_output(tokenizer):
    table = TokenEmbedding(tokenizer, 32, seed=1)
    texts = ["low", "lowest newer", ""]
    batch = tokenizer.encode_batch(texts)
    vectors, mask = table.embed(batch, pad_id=5)
    longest = max(map(len, batch))
    assert vectors.shape == (3, longest, 32) and vectors.dtype == np.float32
    assert mask.tolist() == [[j < len(ids) for j in range(longest)] for ids in batch]
    for row, ids in enumerate(batch):
        assert np.array_equal(vectors[row, : len(ids)], table.weight[ids])
        assert not vectors[row, len(ids) :].any()  # padding is zero
    one, one_mask = table.embed(tokenizer.encode("lowest newer"))
    assert np.array_equal(one, vectors[1:2, : len(batch[1])]) and one_mask.all()
    assert table.embed([])[0].shape == (1, 0, 32)  # the encoding of an empty text
    ids, padded_mask = pad_batch(batch, pad_id=5)
    assert (ids[~padded_mask] == 5).all() and np.array_equal(padded_mask, mask)


def test_scaling_and_added_positions(tokenizer):
    table = TokenEmbedding(tokenizer, 16, seed=2, scale=True)
    ids = [tokenizer.encode("low lower"), tokenizer.encode("newest")]
    plain = TokenEmbedding.from_weights(table.weight)
    sinusoidal = SinusoidalPositions(16)
    vectors, mask = table.embed(ids, positions=sinusoidal)
    unscaled, _ = plain.embed(ids)
    expected = (unscaled * np.float32(4.0) + sinusoidal.encodings(mask.shape[1])) * mask[..., None]
    np.testing.assert_allclose(vectors, expected, rtol=1e-6, atol=1e-6)
    learned = LearnedPositions(8, 16, seed=3)
    with_learned, _ = plain.embed(ids, positions=learned)
    np.testing.assert_allclose(with_learned, (unscaled + learned.weight[: mask.shape[1]]) * mask[..., None], atol=1e-7)


@pytest.mark.parametrize("suffix", [".npy", ".safetensors"])
def test_save_and_load(tmp_path, suffix):
    table = TokenEmbedding(50, 12, seed=4)
    path = tmp_path / f"table{suffix}"
    table.save(path)
    assert os.listdir(tmp_path) == [path.name]  # written through a renamed temporary file
    loaded = TokenEmbedding.load(path, scale=True)
    assert np.array_equal(loaded.weight, table.weight) and loaded.scale
    table.save(path)  # replaces the file


def test_loads_a_safetensors_file_of_another_name(tmp_path):
    from safetensors.numpy import save_file

    weight = np.arange(12, dtype=np.float32).reshape(4, 3)
    save_file({"embed_tokens": weight}, tmp_path / "one.safetensors")
    assert np.array_equal(TokenEmbedding.load(tmp_path / "one.safetensors").weight, weight)
    save_file({"a": weight, "b": weight}, tmp_path / "two.safetensors")
    with pytest.raises(ValueError, match="no tensor named 'weight' among \\['a', 'b'\\]"):
        TokenEmbedding.load(tmp_path / "two.safetensors")


# ------------------------------------------------------------------ sinusoidal


def test_sinusoidal_is_exactly_the_formula():
    d, length = 24, 50
    table = SinusoidalPositions(d).encodings(length)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i] == np.float32(math.sin(angle))
            assert table[pos, 2 * i + 1] == np.float32(math.cos(angle))


def test_each_offset_is_one_fixed_linear_map():
    """PE(pos + k) = M_k · PE(pos) for every pos, for every offset k, with
    M_k block diagonal [[cos kω, sin kω], [−sin kω, cos kω]]; and one least-
    squares matrix maps every PE(pos) to PE(pos + k) (no dependence on pos)."""
    d, length = 16, 200
    table = SinusoidalPositions(d).encodings(length).astype(np.float64)
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    sin_part, cos_part = table[:, 0::2], table[:, 1::2]
    for k in range(length):
        c, s = np.cos(k * omega), np.sin(k * omega)
        shifted_sin = c * sin_part[: length - k] + s * cos_part[: length - k]
        shifted_cos = -s * sin_part[: length - k] + c * cos_part[: length - k]
        np.testing.assert_allclose(table[k:, 0::2], shifted_sin, atol=2e-6)
        np.testing.assert_allclose(table[k:, 1::2], shifted_cos, atol=2e-6)
    for k in (1, 5, 37):
        fitted, *_ = np.linalg.lstsq(table[: length - k], table[k:], rcond=None)
        np.testing.assert_allclose(table[: length - k] @ fitted, table[k:], atol=1e-6)


# ------------------------------------------------------------------------ RoPE

vectors = st.integers(0, 2**32 - 1).map(lambda seed: np.random.default_rng(seed))
head_dims = st.sampled_from([4, 8, 64, 128])
scalings = st.sampled_from([None, "linear", "ntk", "dynamic"])


def rope_for(head_dim: int, scaling: str | None) -> RoPE:
    return RoPE(head_dim, scaling=scaling, factor=4.0, original_context=512 if scaling == "dynamic" else None)


@settings(max_examples=60, deadline=None)
@given(rng=vectors, head_dim=head_dims, scaling=scalings)
def test_rope_keeps_norms(rng, head_dim, scaling):
    x = rng.standard_normal((3, 40, head_dim)).astype(np.float32) * 10
    positions = rng.integers(0, 5000, size=40)
    rotated = rope_for(head_dim, scaling).apply(x, positions)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1), rtol=2e-5)


@settings(max_examples=60, deadline=None)
@given(rng=vectors, head_dim=head_dims, scaling=scalings, m=st.integers(0, 4000), n=st.integers(0, 4000), shift=st.integers(0, 4000))
def test_rope_scores_depend_only_on_the_distance(rng, head_dim, scaling, m, n, shift):
    q, k = rng.standard_normal((2, head_dim)).astype(np.float32)
    rope = rope_for(head_dim, scaling)
    # One call per vector, all four positions at once, so that dynamic NTK
    # uses one set of frequencies.
    positions = np.array([m, n, m + shift, n + shift])
    rq = rope.apply(np.broadcast_to(q, (4, head_dim)), positions)
    rk = rope.apply(np.broadcast_to(k, (4, head_dim)), positions)
    assert float(rq[2] @ rk[3]) == pytest.approx(float(rq[0] @ rk[1]), abs=2e-4 * head_dim)
    theta = rope.frequencies(int(positions.max()) + 1)
    half = head_dim // 2
    complex_q = (q[:half] + 1j * q[half:]).astype(np.complex128)
    complex_k = (k[:half] + 1j * k[half:]).astype(np.complex128)
    expected = np.real(np.sum(complex_q * np.conj(complex_k) * np.exp(1j * (m - n) * theta)))
    assert float(rq[0] @ rk[1]) == pytest.approx(expected, abs=2e-4 * head_dim)


def test_rope_is_the_rotate_half_form_on_batches_of_heads():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    rope = RoPE(8, base=500.0)
    theta = 500.0 ** (-np.arange(0, 8, 2) / 8)
    angle = np.arange(7)[:, None] * theta
    cos, sin = np.tile(np.cos(angle), 2), np.tile(np.sin(angle), 2)
    rotate_half = np.concatenate([-x[..., 4:], x[..., :4]], axis=-1)
    np.testing.assert_allclose(rope.apply(x), x * cos + rotate_half * sin, atol=1e-5)
    transposed = x.transpose(0, 2, 1, 3).copy().transpose(0, 2, 1, 3)  # same values, strided
    np.testing.assert_array_equal(rope.apply(transposed), rope.apply(x))


def yarn_reference(head_dim: int, base: float, factor: float, original: int, beta_fast: float = 32, beta_slow: float = 1) -> np.ndarray:
    """YaRN's frequencies written out from the published formulas (the
    YaRN authors' code, as in transformers' _compute_yarn_parameters)."""
    theta = np.array([base ** (-2 * i / head_dim) for i in range(head_dim // 2)])
    dims = [head_dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base)) for turns in (beta_fast, beta_slow)]
    low, high = max(math.floor(dims[0]), 0), min(math.ceil(dims[1]), head_dim - 1)
    ramp = np.array([min(max((i - low) / (high - low if high != low else 0.001), 0.0), 1.0) for i in range(head_dim // 2)])
    return (1 - ramp) * theta + ramp * theta / factor


@pytest.mark.parametrize("factor", SCALE_FACTORS)
@pytest.mark.parametrize("head_dim", [64, 128])
def test_extension_frequencies_equal_the_published_formulas(factor, head_dim):
    base, original = 10000.0, 4096
    theta = np.array([base ** (-2 * i / head_dim) for i in range(head_dim // 2)])
    np.testing.assert_allclose(rope_frequencies(head_dim, base), theta, rtol=1e-12)
    np.testing.assert_allclose(rope_frequencies(head_dim, base, scaling="linear", factor=factor), theta / factor, rtol=1e-12)
    ntk_base = base * factor ** (head_dim / (head_dim - 2))
    ntk = np.array([ntk_base ** (-2 * i / head_dim) for i in range(head_dim // 2)])
    np.testing.assert_allclose(rope_frequencies(head_dim, base, scaling="ntk", factor=factor), ntk, rtol=1e-12)
    yarn = rope_frequencies(head_dim, base, scaling="yarn", factor=factor, original_context=original)
    np.testing.assert_allclose(yarn, yarn_reference(head_dim, base, factor, original), rtol=1e-12)
    # The fastest dimensions keep their frequency, the slowest are interpolated.
    assert yarn[0] == theta[0] and yarn[-1] == pytest.approx(theta[-1] / factor, rel=1e-12)
    assert RoPE(head_dim, scaling="yarn", factor=factor, original_context=original).attention_factor == pytest.approx(
        0.1 * math.log(factor) + 1
    )
    for seq_len in (100, original, 3 * original):
        dynamic_base = base * (factor * max(seq_len, original) / original - (factor - 1)) ** (head_dim / (head_dim - 2))
        expected = np.array([dynamic_base ** (-2 * i / head_dim) for i in range(head_dim // 2)])
        got = rope_frequencies(head_dim, base, scaling="dynamic", factor=factor, original_context=original, seq_len=seq_len)
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    short = rope_frequencies(head_dim, base, scaling="dynamic", factor=factor, original_context=original, seq_len=10)
    assert np.array_equal(short, rope_frequencies(head_dim, base))


@pytest.mark.parametrize("factor", SCALE_FACTORS)
def test_extension_frequencies_equal_transformers(factor):
    pytest.importorskip("torch", reason="transformers' RoPE parameters need PyTorch")
    rope_utils = pytest.importorskip("transformers.modeling_rope_utils", reason="transformers is not installed")
    from transformers import LlamaConfig

    original = 2048
    for rope_type, ours in (
        ("linear", dict(scaling="linear")),
        ("dynamic", dict(scaling="dynamic", original_context=original, seq_len=5000)),
        ("yarn", dict(scaling="yarn", original_context=original)),
    ):
        config = LlamaConfig(
            hidden_size=1024, num_attention_heads=8,
            max_position_embeddings=original if rope_type != "yarn" else int(original * factor),
            rope_parameters={"rope_type": rope_type, "rope_theta": 10000.0, "factor": factor, "original_max_position_embeddings": original},
        )
        extra = {"seq_len": 5000} if rope_type == "dynamic" else {}
        inv_freq, attention = rope_utils.ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", **extra)
        theta = rope_frequencies(128, 10000.0, factor=factor, **ours)
        np.testing.assert_allclose(theta, inv_freq.double().numpy(), rtol=1e-6)
        if rope_type == "yarn":
            assert attention == pytest.approx(yarn_attention_factor(factor))


def test_yarn_scales_norms_by_its_attention_factor():
    rope = RoPE(64, scaling="yarn", factor=8, original_context=1024)
    x = np.random.default_rng(6).standard_normal((5, 64)).astype(np.float32)
    ratio = np.linalg.norm(rope.apply(x, np.arange(5) * 999), axis=-1) / np.linalg.norm(x, axis=-1)
    np.testing.assert_allclose(ratio, 0.1 * math.log(8) + 1, rtol=1e-5)


def test_long_term_decay():
    rope = RoPE(128)
    decay = rope.long_term_decay(1000)
    assert decay[0] == 64 and decay.shape == (1001,)
    theta = rope.frequencies()
    assert decay[777] == pytest.approx(sum(math.cos(777 * t) for t in theta))


# ----------------------------------------------------------------------- ALiBi


def test_alibi_slopes():
    np.testing.assert_array_equal(alibi_slopes(8), [1 / 2 ** (h + 1) for h in range(8)])
    np.testing.assert_allclose(alibi_slopes(16), [2 ** (-(h + 1) / 2) for h in range(16)])
    # 12 heads: the 8 slopes of 8 heads, then the odd-numbered slopes of 16.
    np.testing.assert_allclose(alibi_slopes(12), [*alibi_slopes(8), *alibi_slopes(16)[0::2][:4]])
    assert alibi_slopes(1).tolist() == [2**-8]


def test_alibi_bias_is_added_to_scores():
    alibi = ALiBi(4)
    bias = alibi.bias(5)
    assert bias.shape == (4, 5, 5) and bias.dtype == np.float32
    for h in range(4):
        for i in range(5):
            for j in range(5):
                assert bias[h, i, j] == np.float32(-alibi.slopes[h] * abs(i - j))
    scores = np.random.default_rng(7).standard_normal((2, 4, 5, 5)).astype(np.float32)
    np.testing.assert_array_equal(alibi.add_to(scores), scores + bias)
    # Two new queries after eight cached keys are at positions 6 and 7.
    np.testing.assert_array_equal(alibi.bias(2, 8), alibi.bias(8)[:, 6:])


# -------------------------------------------------------------- against PyTorch


def test_numpy_equals_pytorch():
    torch = torch_or_skip()
    rng = np.random.default_rng(8)
    batch, heads, seq, head_dim = 2, 3, 33, 16
    table = TokenEmbedding(100, heads * head_dim, seed=9, scale=True)
    ids = rng.integers(0, 100, size=(batch, seq))
    vectors, _ = table.embed(ids, positions=SinusoidalPositions(heads * head_dim))
    # The Annotated Transformer's sinusoidal table and nn.functional.embedding.
    d = heads * head_dim
    position = torch.arange(seq, dtype=torch.float64)[:, None]
    div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * -(math.log(10000.0) / d))
    pe = torch.zeros(seq, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
    expected = torch.nn.functional.embedding(torch.from_numpy(ids), torch.from_numpy(table.weight)) * math.sqrt(d) + pe.float()
    np.testing.assert_allclose(vectors, expected.numpy(), rtol=1e-5, atol=1e-5)
    # RoPE as transformers' Llama applies it (rotate_half), for each scaling.
    x = torch.from_numpy(vectors).view(batch, seq, heads, head_dim).transpose(1, 2)
    for settings_ in (dict(), dict(scaling="ntk", factor=2.0), dict(scaling="yarn", factor=4.0, original_context=16)):
        rope = RoPE(head_dim, **settings_)
        inv_freq = torch.from_numpy(rope.frequencies(seq)).float()
        angles = torch.arange(seq, dtype=torch.float32)[:, None] * inv_freq
        emb = torch.cat([angles, angles], dim=-1)
        cos, sin = emb.cos() * rope.attention_factor, emb.sin() * rope.attention_factor
        rotated = x * cos + torch.cat([-x[..., head_dim // 2 :], x[..., : head_dim // 2]], dim=-1) * sin
        np.testing.assert_allclose(rope.apply(x.numpy()), rotated.numpy(), rtol=1e-4, atol=1e-4)
    # ALiBi's bias, as in the paper's fairseq code (causal part).
    slopes = torch.from_numpy(alibi_slopes(heads))
    distance = torch.arange(seq)[None, :] - torch.arange(seq)[:, None]
    causal = (slopes[:, None, None] * distance.clamp(max=0)).float()
    np.testing.assert_array_equal(np.tril(ALiBi(heads).bias(seq)), torch.tril(causal).numpy())


# ------------------------------------------------------------ RoPE base bound


def test_rope_base_lower_bound_of_the_paper():
    """Men et al. 2024, table of lower bounds (head_dim 128): 4.3e3 for a
    context of 1,024 tokens; the base returned works and a base just
    below it does not."""
    bound = rope_base_lower_bound(1024, 128)
    assert f"{bound:.1e}" == "4.3e+03"
    distances = np.arange(1025)

    def lowest(base: float) -> float:
        theta = base ** (-np.arange(0, 128, 2) / 128)
        return np.cos(distances[:, None] * theta).sum(axis=1).min()

    assert lowest(bound) >= 0 and lowest(bound * (1 - 2e-6)) < 0


def test_rope_base_criterion_is_not_monotone_and_the_search_finds_the_first_base():
    head_dim, length = 16, 300
    bound = rope_base_lower_bound(length, head_dim, grid_step=1e-3)
    bases = np.exp(np.arange(1, 20_000) * math.log1p(1e-3))
    bases = bases[bases < bound * 4]
    theta = bases[:, None] ** (-np.arange(0, head_dim, 2) / head_dim)
    works = (np.cos(np.arange(length + 1)[None, :, None] * theta[:, None, :]).sum(axis=2) >= 0).all(axis=1)
    first = bases[works.argmax()]
    assert first / (1 + 1e-3) < bound <= first  # no grid base below the bound works
    assert not works[bases > bound].all()  # some larger bases fail again: not monotone


# -------------------------------------------------------------------- bad input


def test_bad_input_raises_clear_errors(tokenizer):
    table = TokenEmbedding(tokenizer, 8)
    with pytest.raises(ValueError, match=f"token id {tokenizer.vocab_size} at index \\(0, 1\\) is outside the vocabulary"):
        table.embed([[1, tokenizer.vocab_size]])
    with pytest.raises(ValueError, match="token id -3"):
        table.embed([-3])
    with pytest.raises(TypeError, match="token ids must be integers"):
        table.embed([[1, "a"]])
    with pytest.raises(TypeError, match="float64"):
        table.lookup(np.zeros(3))
    with pytest.raises(ValueError, match="even head dimension.*head_dim=7"):
        RoPE(7)
    with pytest.raises(ValueError, match="ntk scaling .* needs head_dim ≥ 4, got head_dim=2"):
        RoPE(2, scaling="ntk", factor=2)
    with pytest.raises(ValueError, match="even head dimension.*head_dim=5"):
        rope_base_lower_bound(100, 5)
    with pytest.raises(ValueError, match="a sequence of 9 tokens is longer than the learned position table \\(max_length=8\\)"):
        table.embed([list(range(9))], positions=LearnedPositions(8, 8))
    with pytest.raises(ValueError, match="shape \\(2, 5, 6\\)"):
        RoPE(8).apply(np.zeros((2, 5, 6), dtype=np.float32))
    with pytest.raises(ValueError, match="positions must be 5 integers.*shape \\(4,\\)"):
        RoPE(8).apply(np.zeros((5, 8), dtype=np.float32), [0, 1, 2, 3])
    with pytest.raises(ValueError, match="scores of shape \\(\\.\\.\\., 4, queries, keys\\), got shape \\(1, 3, 2, 2\\)"):
        ALiBi(4).add_to(np.zeros((1, 3, 2, 2)))
    with pytest.raises(ValueError, match="positions have d_model=16, the token embedding 8"):
        table.embed([1], positions=SinusoidalPositions(16))
    with pytest.raises(ValueError, match="shape \\(3, 4\\), expected \\(8, 4\\)"):
        LearnedPositions(8, 4, weight=np.zeros((3, 4)))
    with pytest.raises(ValueError, match="2-D \\(vocab_size, d_model\\), got shape \\(5,\\)"):
        TokenEmbedding.from_weights(np.zeros(5))
    with pytest.raises(TypeError, match="RoPE and ALiBi act on attention"):
        table.embed([1], positions=RoPE(8))
    with pytest.raises(ValueError, match="unknown RoPE scaling 'longrope'"):
        RoPE(8, scaling="longrope", factor=2)
    with pytest.raises(ValueError, match="yarn scaling needs original_context"):
        RoPE(8, scaling="yarn", factor=2)
    with pytest.raises(ValueError, match="at least 1, got 0.5"):
        RoPE(8, scaling="ntk", factor=0.5)
    with pytest.raises(ValueError, match="vocab_size must be a positive integer, got 0"):
        TokenEmbedding(0, 8)
    with pytest.raises(ValueError, match="table.txt: embedding tables are saved as .npy or .safetensors files"):
        table.save("table.txt")


# ------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("positions", ["rope", "sinusoidal", "learned", "alibi", "none"])
def test_cli_embed(tmp_path, tokenizer, positions):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib")
    path = tmp_path / "tok.json"
    tokenizer.save(str(path))
    args = ["embed", "-t", str(path), "low lower", "newest", "--dim", "32", "--positions", positions, "--save", str(tmp_path / "v.npy")]
    if positions != "none":
        args += ["--plot", str(tmp_path / "p.png")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "(2, " in result.output and "mean norm" in result.output
    saved = np.load(tmp_path / "v.npy")
    assert saved.shape[-1] == (8 if positions == "rope" else 32)
    if positions != "none":
        assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_embed_errors(tmp_path, tokenizer):
    path = tmp_path / "tok.json"
    tokenizer.save(str(path))
    runner = CliRunner()
    too_long = runner.invoke(main, ["embed", "-t", str(path), "low lower lowest", "--positions", "learned", "--max-length", "2"])
    assert too_long.exit_code != 0 and "longer than the learned position table (max_length=2)" in too_long.output
    heads = runner.invoke(main, ["embed", "-t", str(path), "low", "--positions", "rope", "--dim", "30", "--heads", "4"])
    assert heads.exit_code != 0 and "30 is not a multiple of 4" in heads.output
    odd = runner.invoke(main, ["embed", "-t", str(path), "low", "--positions", "rope", "--dim", "30", "--heads", "2"])
    assert odd.exit_code != 0 and "head_dim=15" in odd.output
