"""The README and the documentation site stay what the issue asked: a README a newcomer reads
in five minutes whose every link leads somewhere, and pages whose figures say where they come
from. ``make docs`` (Sphinx, warnings as errors) checks the rest: cross-references, the API
reference against the docstrings, and the tutorials' saved outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuperf_magics.datasets import lattuada2022, sia2023

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links(path: Path) -> list[str]:
    """The link targets of a Markdown file that point into the repository."""
    targets = LINK.findall(path.read_text(encoding="utf-8"))
    return [t.split("#", 1)[0] for t in targets
            if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines: move the detail to a page under docs/"


def test_the_readme_links_only_to_files_that_exist() -> None:
    links = _relative_links(README)
    assert len(links) >= 10  # the pages of the site, the screenshot, the notebooks ...
    missing = [t for t in links if not (ROOT / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_links_every_page_of_the_site() -> None:
    """A reader of the README can reach every hand-written page (the tutorials and the API
    through their index)."""
    linked = {(ROOT / t).resolve() for t in _relative_links(README)}
    pages = {p.resolve() for p in DOCS.glob("*.md") if p.name != "index.md"}
    assert pages - linked == set(), sorted(p.name for p in pages - linked)


FIGURES = sorted(p for p in (DOCS / "figures").glob("*.md") if p.name != "README.md")


@pytest.mark.parametrize("figure", FIGURES, ids=lambda p: p.name)
def test_each_figure_names_its_benchmark_and_is_shown(figure: Path) -> None:
    first = figure.read_text(encoding="utf-8").splitlines()[0]
    assert re.search(r"benchmarks/\w+\.py", first), (
        f"{figure.name}: its first line should name the benchmark that wrote it")
    includes = " ".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    assert f"figures/{figure.name}" in includes, f"{figure.name} is included by no page"


@pytest.mark.parametrize("dataset", [lattuada2022.DATASET, sia2023.DATASET],
                         ids=lambda d: d.name)
def test_the_data_page_gives_the_pinned_commit(dataset) -> None:
    """docs/data.md names each downloaded data set's repository and the commit the package
    pins, so the page changes when the pin does."""
    text = (DOCS / "data.md").read_text(encoding="utf-8")
    assert dataset.repository in text and dataset.commit in text
