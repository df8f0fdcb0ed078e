"""The README's Quick start and examples work as written, and CI runs its
test command unchanged."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import CORPORA, ROOT

README = (ROOT / "README.md").read_text("utf-8")


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S)]


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_second():
    commands = quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    ci = (ROOT / ".ci" / "run").read_text("utf-8").strip().splitlines()
    assert ci[-1] == commands[1]


def test_python_examples_run(tmp_path, monkeypatch):
    # As from the repository root: corpora/ here, ../shared/ beside it.
    shared = ROOT.parent / "shared"
    if not shared.is_dir():
        pytest.skip(f"the examples read BERT's files from {shared}, which is absent")
    project = tmp_path / "project"
    shutil.copytree(CORPORA, project / "corpora")
    (tmp_path / "shared").symlink_to(shared)
    monkeypatch.chdir(project)
    for block in code_blocks("python"):
        exec(compile(block, "README.md", "exec"), {})
