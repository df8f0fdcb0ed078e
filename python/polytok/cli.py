"""The ``polytok`` command line."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from polytok import PolytokError
from polytok._files import corpus_files
from polytok.bpe import BPETokenizer, readable
from polytok.pretokenize import PRESETS

MODELS = ("bpe",)


@contextmanager
def _errors() -> Iterator[None]:
    """Clear one-line messages instead of tracebacks for expected failures."""
    try:
        yield
    except (PolytokError, OSError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


def _load(path: str, pattern: str | None) -> BPETokenizer:
    if path.endswith(".tiktoken"):
        if pattern is None:
            raise click.UsageError("a .tiktoken rank file holds no pattern: give --pattern (e.g. cl100k)")
        return BPETokenizer.from_tiktoken(path, pattern=pattern)
    return BPETokenizer.load(path)


tokenizer_option = click.option(
    "-t", "--tokenizer", "tokenizer_path", required=True, type=click.Path(dir_okay=False),
    help="A polytok .json file or a tiktoken rank file (.tiktoken, with --pattern).",
)
pattern_for_ranks = click.option(
    "--pattern", default=None, help="Pre-tokenization pattern for a .tiktoken rank file."
)


@click.group()
@click.version_option(package_name="polytok")
def main() -> None:
    """polytok: fast, exact tokenizers. Train, encode, decode, inspect."""


@main.command()
@click.argument("files", nargs=-1, required=True)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Where to save the tokenizer (.json, or .tiktoken for the ranks only).")
@click.option("--model", type=click.Choice(MODELS), default="bpe", show_default=True)
@click.option("--vocab-size", type=int, required=True, help="Total tokens: 256 bytes + merges + special tokens.")
@click.option("--pattern", default="cl100k", show_default=True, help=f"Pre-tokenization: {', '.join(PRESETS)}, none, or a regex.")
@click.option("--min-frequency", type=int, default=2, show_default=True, help="Do not merge pairs seen fewer times.")
@click.option("--special-token", "special_tokens", multiple=True, help="A special token (repeatable); ids follow the learned tokens.")
@click.option("--max-token-bytes", type=int, default=None, help="Longest token to learn, in bytes.")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True, help="Bytes that are not UTF-8: fail, or replace with U+FFFD.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary.")
def train(files, output, model, vocab_size, pattern, min_frequency, special_tokens, max_token_bytes, errors, quiet) -> None:
    """Learn a tokenizer from FILES (files, directories of .txt files, globs)."""
    with _errors():
        start = time.perf_counter()
        tokenizer = BPETokenizer.train(
            files,
            vocab_size=vocab_size,
            pattern=pattern,
            min_frequency=min_frequency,
            special_tokens=special_tokens,
            max_token_bytes=max_token_bytes,
            errors=errors,
            progress=False if quiet else None,
        )
        if output.endswith(".tiktoken"):
            tokenizer.save_tiktoken(output)
        else:
            tokenizer.save(output)
        if not quiet:
            corpus = (tokenizer.training or {}).get("corpus", {})
            click.echo(
                f"trained {tokenizer.vocab_size} tokens ({model}, pattern {pattern}) on "
                f"{corpus.get('bytes', 0) / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s -> {output}",
                err=True,
            )


@main.command()
@tokenizer_option
@pattern_for_ranks
@click.argument("text", nargs=-1)
@click.option("--allow-special", is_flag=True, help="Recognize special tokens in the text.")
@click.option("--show", "show", type=click.Choice(["ids", "tokens", "both"]), default="ids", show_default=True)
def encode(tokenizer_path, pattern, text, allow_special, show) -> None:
    """Encode TEXT (or standard input) and print the ids, one line per input line."""
    with _errors():
        tokenizer = _load(tokenizer_path, pattern)
        source = " ".join(text) if text else sys.stdin.read()
        allowed = "all" if allow_special else ()
        ids = tokenizer.encode(source, allowed_special=allowed)
        if show in ("ids", "both"):
            click.echo(" ".join(map(str, ids)))
        if show in ("tokens", "both"):
            Console().print(_highlighted(tokenizer, ids))


@main.command()
@tokenizer_option
@pattern_for_ranks
@click.argument("ids", nargs=-1, type=int)
def decode(tokenizer_path, pattern, ids) -> None:
    """Decode IDS (or whitespace-separated ids on standard input) to text."""
    with _errors():
        tokenizer = _load(tokenizer_path, pattern)
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
@click.option("--sample", "samples", multiple=True, help="Text files (or directories) to tokenize as a demonstration.")
@click.option("--longest", type=int, default=8, show_default=True, help="How many of the longest tokens to list.")
def info(tokenizer_path, pattern, samples, longest) -> None:
    """Describe a tokenizer; with --sample, show how it cuts real text."""
    with _errors():
        tokenizer = _load(tokenizer_path, pattern)
        console = Console()
        summary = Table.grid(padding=(0, 2))
        summary.add_row("model", "byte-level BPE")
        summary.add_row("vocabulary", f"{tokenizer.vocab_size} ids ({tokenizer.n_ordinary} ordinary, {len(tokenizer.special_tokens)} special)")
        summary.add_row("pattern", tokenizer.pattern)
        if tokenizer.special_tokens:
            summary.add_row("special", ", ".join(f"{t} = {i}" for t, i in tokenizer.special_tokens.items()))
        training = tokenizer.training
        if training:
            corpus = training.get("corpus", {})
            summary.add_row(
                "trained",
                f"min frequency {training.get('min_frequency')}, "
                f"on {corpus.get('bytes', 0) / 1e6:.2f} MB ({corpus.get('distinct_pieces', 0)} distinct pieces)",
            )
        by_length = sorted(range(tokenizer.n_ordinary), key=lambda i: (-len(tokenizer.token_bytes(i)), i))
        summary.add_row("longest", "  ".join(repr(tokenizer.id_to_token(i)) for i in by_length[:longest]))
        console.print(summary)
        if samples:
            _show_samples(console, tokenizer, corpus_files(samples))


def _highlighted(tokenizer: BPETokenizer, ids: list[int]) -> Text:
    """The tokens of a text, with alternating backgrounds to show where each
    one starts. Tokens that hold only part of a character are shown together
    with the tokens that complete it, underlined."""
    text = Text()
    pending, parts, n = b"", 0, 0
    for token_id in ids:
        pending += tokenizer.token_bytes(token_id)
        parts += 1
        try:
            segment = pending.decode("utf-8")
        except UnicodeDecodeError:
            continue
        style = "black on bright_cyan" if n % 2 == 0 else "black on bright_yellow"
        text.append(segment.replace("\n", "\\n"), style=style + (" underline" if parts > 1 else ""))
        pending, parts, n = b"", 0, n + 1
    if pending:
        text.append(readable(pending), style="black on bright_red")
    return text


def _show_samples(console: Console, tokenizer: BPETokenizer, files: list[Path]) -> None:
    table = Table(title="Tokens per file", title_justify="left")
    for column in ("file", "bytes", "tokens", "bytes/token", "first line, token by token"):
        table.add_column(column, justify="right" if column in ("bytes", "tokens", "bytes/token") else "left")
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines()
        ids = [i for line in tokenizer.encode_batch(lines) for i in line]
        size = sum(len(line.encode("utf-8")) for line in lines)
        first = lines[0][:80] if lines else ""
        table.add_row(
            path.name, str(size), str(len(ids)), f"{size / max(len(ids), 1):.2f}",
            _highlighted(tokenizer, tokenizer.encode(first)),
        )
    console.print(table)
