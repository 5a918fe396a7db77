"""The README stays a front door: at most 250 lines, no commit hashes, nothing linking outside the repo."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_is_at_most_250_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_readme_links_stay_inside_the_repository():
    text = README.read_text(encoding="utf-8")
    assert "../shared" not in text
    for target in re.findall(r"\]\(([^)#]+)", text):
        if not target.startswith("http"):
            assert (README.parent / target).exists(), target
