"""Every command line of the README's "Command line" section runs as written, in order, in an
empty folder beside ``shared/`` (issue 11, item 14). Lines that read ``../shared/datasets`` run
when the datasets folder exists and are skipped otherwise."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from benchmarks.datasets import datasets_dir
from harness import ROOT, child_env


pytestmark = pytest.mark.slow


def command_lines() -> list[str]:
    """The ``python -m grail_duckdb`` lines of the first code block under "## Command line"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Command line\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines()
            if line.startswith("python -m grail_duckdb")]


def test_the_section_has_the_commands_the_issue_asks_for():
    lines = command_lines()
    assert any(" build " in f" {line} " for line in lines)
    assert any(" query " in f" {line} " for line in lines)
    assert lines[0] == "python -m grail_duckdb demo"


def test_every_command_line_runs(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    data = datasets_dir()
    if data is not None:
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "datasets").symlink_to(data)
    env = child_env()
    env.pop("GRAIL_DUCKDB_DATASETS", None)
    ran = 0
    for line in command_lines():
        if "../shared/datasets" in line and data is None:
            continue
        argv = shlex.split(line)
        assert argv[0] == "python"
        r = subprocess.run([sys.executable, *argv[1:]], cwd=work, env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, f"{line}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        assert "Traceback" not in r.stderr and "leaked" not in r.stderr, (line, r.stderr)
        ran += 1
    assert ran >= (6 if data is not None else 5)     # the one line on the datasets skipped
    assert (work / "papers.duckdb.cites.grail.parquet").exists()
    answers = (work / "answers.csv").read_text().splitlines()
    assert answers[0] == '"src","dst","reaches"' and len(answers) > 20_000
