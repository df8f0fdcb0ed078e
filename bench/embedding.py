"""Embedding-stage speed: polytok's NumPy embedding and RoPE against the same
computation in PyTorch on CPU, in the same run.

The work: a batch of 64 × 512 token ids (a rectangular id array) looked up
in a 32,000 × 768 float32 table, split into 12 heads of 64 and rotated by
RoPE (base 10,000), giving the (64, 12, 512, 64) query array attention
takes. polytok: ``TokenEmbedding.embed`` then ``RoPE.apply`` on the
(batch, heads, seq, head_dim) view. PyTorch (no autograd):
``nn.functional.embedding``, ``view``/``transpose``, and RoPE twice over:
as transformers' Llama applies it (``x * cos + rotate_half(x) * sin``, the
usual code) and in the same halves form as polytok (the two halves rotated
separately, no concatenation); the ratio is against the faster of the two.
Each round times every contender once, in an order rotated from round to
round; figures are medians over the rounds, and the ratio is the median of
the per-round ratios. The results are checked equal first.

Usage: python bench/embedding.py [--rounds 9] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

import numpy as np

from polytok.embedding import RoPE, TokenEmbedding

BATCH, SEQ, D_MODEL, HEADS, VOCAB = 64, 512, 768, 12, 32_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds (default 9)")
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    try:
        import torch
    except ImportError:
        print("SKIPPED: PyTorch is not installed (pip install torch)", file=sys.stderr)
        sys.exit(0)

    head_dim, half = D_MODEL // HEADS, D_MODEL // HEADS // 2
    table = TokenEmbedding(VOCAB, D_MODEL, seed=0)
    rope = RoPE(head_dim)
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(BATCH, SEQ))

    def polytok_numpy() -> np.ndarray:
        vectors, _ = table.embed(ids)
        return rope.apply(vectors.reshape(BATCH, SEQ, HEADS, head_dim).transpose(0, 2, 1, 3))

    weight, ids_t = torch.from_numpy(table.weight), torch.from_numpy(ids)
    cos_half, sin_half = (torch.from_numpy(a) for a in rope.cos_sin(np.arange(SEQ)))
    cos_full, sin_full = torch.cat([cos_half, cos_half], -1), torch.cat([sin_half, sin_half], -1)

    def heads_t() -> torch.Tensor:
        return torch.nn.functional.embedding(ids_t, weight).view(BATCH, SEQ, HEADS, head_dim).transpose(1, 2)

    @torch.no_grad()
    def torch_rotate_half() -> torch.Tensor:
        x = heads_t()
        return x * cos_full + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin_full

    @torch.no_grad()
    def torch_halves() -> torch.Tensor:
        x = heads_t()
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos_half - x2 * sin_half, x2 * cos_half + x1 * sin_half], dim=-1)

    contenders = {"polytok (NumPy)": polytok_numpy, "torch, rotate_half": torch_rotate_half, "torch, halves": torch_halves}
    reference = polytok_numpy()
    for name in ("torch, rotate_half", "torch, halves"):
        np.testing.assert_allclose(contenders[name]().numpy(), reference, rtol=1e-5, atol=1e-5, err_msg=name)

    print(f"{BATCH} x {SEQ} tokens, d_model {D_MODEL}, RoPE on {HEADS} heads of {head_dim}; vocabulary {VOCAB}")
    print(f"numpy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads), {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}, {rounds} rounds")
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for fn in contenders.values():  # warm-up, not timed
        fn()
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            gc.collect()
            start = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - start)
    ours = times["polytok (NumPy)"]
    fastest_torch = [min(a, b) for a, b in zip(times["torch, rotate_half"], times["torch, halves"])]
    ratio = statistics.median(o / t for o, t in zip(ours, fastest_torch))
    rows = [(name, statistics.median(t) * 1000) for name, t in times.items()]
    print()
    print("| computation | median ms |")
    print("|---|---:|")
    for name, ms in rows:
        print(f"| {name} | {ms:.1f} |")
    verdict = "ok (goal ≤ 1.5)" if ratio <= 1.5 else "SLOWER than the goal of 1.5"
    print(f"\npolytok / fastest torch, median of per-round ratios: {ratio:.2f} — {verdict}")


if __name__ == "__main__":
    main()
