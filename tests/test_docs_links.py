"""Every relative link in the README and docs/ leads to a file that exists (pages move; links must follow)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    """The targets of Markdown links that are paths in this repository (no URL, no in-page anchor)."""
    targets = [m.group(1).split("#", 1)[0] for m in LINK.finditer(text)]
    return [t for t in targets if t and not re.match(r"[a-z][a-z+.-]*:", t)]


def test_links_are_read_as_a_reader_follows_them():
    text = "[a](docs/x.md#part) [b](https://e.org/y.md) [c](#here) [d](../z.md) `[e](not a link)`"
    assert relative_links(text) == ["docs/x.md", "../z.md"]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_leads_to_a_file(page: Path):
    missing = [t for t in relative_links(page.read_text(encoding="utf-8")) if not (page.parent / t).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} links to what does not exist: {missing}"
