"""The README's advice links to the sections of docs/results.md that hold the figures: every `docs/results.md#anchor`
link it has must land on a heading there (GitHub's anchors), so a renamed section breaks a test, not a reader's
click. The package's comments and docstrings link to the docs by URL (the modeling files ship to the Hub, where the
docs folder cannot be opened): each of those anchors must land on a heading too."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\((docs/results\.md)#([\w-]+)\)")
URL = re.compile(r"https://github\.com/hf-longdoc/hf_longdoc/blob/main/(docs/[\w-]+\.md)#([\w-]+)")


def anchors(markdown):
    """GitHub's anchors of the headings of `markdown` (outside fenced code): lower case, punctuation dropped, spaces
    to hyphens, a repeated heading numbered -1, -2, ..."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            count = sum(1 for earlier in found if re.fullmatch(re.escape(slug) + r"(-\d+)?", earlier))
            found.append(slug if not count else f"{slug}-{count}")
    return set(found)


def readme_links():
    return sorted(set(LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))))


def source_links():
    return sorted({link for path in (ROOT / "src").rglob("*.py") for link in URL.findall(path.read_text("utf-8"))})


def test_anchors_follow_githubs_rule():
    assert anchors("# Results\n## Every method from scratch: `hf-longdoc compare`\n```\n# not a heading\n```\n"
                   "### Results\n") == {"results", "every-method-from-scratch-hf-longdoc-compare", "results-1"}


def test_the_readme_links_to_sections_of_results():
    assert len(readme_links()) >= 3


@pytest.mark.parametrize(("path", "anchor"), readme_links())
def test_each_readme_link_lands_on_a_heading(path, anchor):
    headings = anchors((ROOT / path).read_text(encoding="utf-8"))
    assert anchor in headings, f"README links {path}#{anchor}: no such heading"


def test_the_modeling_files_cite_the_docs_by_url_not_by_path():
    assert any(path == "docs/results.md" for path, _ in source_links())
    for path in (ROOT / "src" / "hf_longdoc" / "modeling").rglob("*.py"):
        text = URL.sub("", path.read_text(encoding="utf-8"))
        assert not re.search(r"\b(results|models)\.md\b", text), f"{path.name} names a docs file without its URL"


@pytest.mark.parametrize(("path", "anchor"), source_links())
def test_each_source_link_lands_on_a_heading(path, anchor):
    headings = anchors((ROOT / path).read_text(encoding="utf-8"))
    assert anchor in headings, f"the source links {path}#{anchor}: no such heading"
