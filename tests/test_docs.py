"""The documentation that is generated is what its generator gives: docs/benchmarks.md and the
README's headline table from benchmarks/results/ (``python -m benchmarks docs``); and the
README stays the manual."""
from __future__ import annotations

import json
import re

import pytest

from benchmarks import docs
from harness import ROOT


def test_benchmarks_page_and_headline_table_are_generated():
    runs = docs.results()
    assert (ROOT / "docs" / "benchmarks.md").read_text() == docs.render(runs), (
        "run python -m benchmarks docs")
    readme = (ROOT / "README.md").read_text()
    assert docs.with_headline(readme, docs.headline(runs)) == readme, (
        "run python -m benchmarks docs")


@pytest.mark.parametrize("kind", ["layouts", "first_run", "scale", "paths", "append"])
def test_the_committed_results_of_each_kind_render(kind):
    runs = [(name, r) for name, r in docs.results() if isinstance(r, dict)
            and r.get("kind") == kind]
    assert runs, f"benchmarks/results/ holds no {kind} report"
    for name, report in runs:
        assert docs.section(name, report).startswith(f"## {name}")
        assert (docs.RESULTS / f"{name}.json").exists()


def test_an_append_report_cut_short_renders():
    """The append bench rewrites its report after every step: a run cut at a time limit (no
    full build, no rebuilt index's queries yet) still renders, and says it was cut."""
    from benchmarks import append

    name, report = next((n, r) for n, r in docs.results() if isinstance(r, dict)
                        and r.get("kind") == "append" and r.get("appends"))
    cut = json.loads(json.dumps(report))
    cut["complete"] = False
    cut["appends"].pop("full_build_seconds")
    cut["appends"]["queries"] = {
        k: {f: v for f, v in q.items() if not f.startswith("rebuilt")
            and f not in ("ratio", "answers_equal")} for k, q in cut["appends"]["queries"].items()}
    text = append.render(cut)
    assert "cut short" in text and "The full build did not run" in text
    assert append.render(report).count("**NO**") == 0, f"{name}: answers differ"


def test_the_readme_is_a_manual_without_history():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 400
    assert not re.search(r"\b(stop|round) \d+|this session", text, re.I)
    setup = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.*?)```", setup, re.S).group(1).strip().splitlines()
    assert [c.split()[0] for c in commands] == ["pip", "python"]  # the demo, the tests


def test_the_package_cites_no_diary():
    for path in (ROOT / "grail_duckdb").rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"stop \d|README, Scale", text), path
        assert len(text.splitlines()) <= 600, path
