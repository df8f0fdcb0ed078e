"""Progress bars for long work, on stderr, only on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: (stage, done, total[, note]) -> None, called by the Rust core; the note
#: says what the work serves now (the language parity-aware training
#: merges for), where that changes.
Callback = Callable[..., None]


def wanted(progress: bool | None) -> bool:
    """``None`` means: show progress when stderr is a terminal."""
    if progress is None:
        return sys.stderr.isatty()
    return progress


@contextmanager
def progress_callback(show: bool) -> Iterator[Callback | None]:
    """A callback that draws one bar per stage, or ``None`` when quiet.

    Even when quiet, the Rust core checks for Ctrl-C regularly."""
    if not show:
        yield None
        return
    columns = (
        TextColumn("[bold]{task.description:<9}"),
        BarColumn(),
        TextColumn("{task.fields[amount]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bars:
        tasks: dict[str, TaskID] = {}

        def update(stage: str, done: int, total: int, note: str | None = None) -> None:
            if stage not in tasks:
                tasks[stage] = bars.add_task(stage, total=total, amount="")
            amount = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB" if stage == "counting" else f"{done}/{total}"
            if note:
                amount += f" ({note})"
            bars.update(tasks[stage], completed=done, total=total, amount=amount)

        yield update
