"""The README's headline table is the one ``benchmarks.headline`` renders from the report the
README names (one invocation, one commit): nothing in it is typed by hand."""

import json
import re
from pathlib import Path

from benchmarks import headline

ROOT = Path(__file__).resolve().parents[2]


def test_readme_table_equals_the_rendered_report():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = re.findall(r"python -m benchmarks\.headline (\S+?\.json)", text)
    assert named, "the README no longer names the report behind its headline"
    report = json.loads((ROOT / named[0]).read_text(encoding="utf-8"))
    rendered = headline.table(report)
    assert rendered in text, "the README's headline differs from `python -m benchmarks.headline " + named[0] + "`"
