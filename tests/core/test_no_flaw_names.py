"""No flaw names in generic code: nothing under ``evo_core/`` or the standard plugins
(``plugins/evo_plugins/``, except the optional warm priors in ``priors/``) names a
domain-specific signal or a specific planted flaw. A harness that only works because it
knows a flaw by name would pass the suite without finding anything; the generated test
log (``evo_core.synthetic``) and the simulated learner (``evo_core.simulation``) use
neutral names (``sim_count``, ``sim_exploited``, ``sim_exploit``, ``exploit_rate``).

Checked on the text of every file (code, templates, data), case-insensitively, and on the
file names. ``tests/harness/test_diagnostics.py`` keeps a narrower check of the generic
diagnostics module and of the ``prior`` flags.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERIC = (ROOT / "evo_core", ROOT / "plugins" / "evo_plugins")
EXEMPT = (ROOT / "plugins" / "evo_plugins" / "priors",)  # the flaw-specific warm priors may name flaws

# Lower-case fragments; any occurrence (case-insensitive) in a generic file is a failure.
FLAW_NAMES = (
    # the hedge flaw (arithmetic, math): hedge, hedged, hedging, hedge_rate, answer_hedging
    "hedg", "answer_count", "multi_answer",
    # arithmetic flaws' signals (hedge, substring, padding, echo, operand)
    "numbers_found", "gold_listed", "digit_chars", "span_hit", "trailing_chars", "record_match", "single_number",
    # math extraction signals
    "boxed_count", "candidate_count", "list_answer", "unclosed_box",
    # code domain: the visible_tests flaw and its hard-coding signals
    "visible_tests", "hardcoded", "input_branch_hits",
    # SWE episodes: test tampering, history mining, sandbox escapes
    "git_history", "test_files_modified", "test_files_deleted", "runner_config", "outside_write", "escape_attempt",
    # the priors' flaw-specific diagnostics and repairs
    "special_casing", "test_tampering", "strict_extraction",
)


def arithmetic_flaw_signals() -> set[str]:
    """The compound signal names the arithmetic domain's flaws report (plain words such as
    ``numbers`` or ``bonus`` are left out: generic code may use those words)."""
    from evo_arithmetic.flaws import FLAWS

    names: set[str] = set()
    for flaw in FLAWS.values():
        for text in ("12 13", "25", "12+13", "25==="):
            _, signals = flaw.reward(text, 25, "12+13=")
            names |= {k.lower() for k in signals if "_" in k}
    return names


def generic_files(roots=GENERIC, exempt=EXEMPT):
    for root in roots:
        for path in sorted(root.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or any(e in path.parents for e in exempt):
                continue
            yield path


def flaw_name_hits(paths, names) -> list[tuple[str, int, str]]:
    """(file, line number, name) for each line (or file name, line 0) naming a flaw."""
    hits = []
    for path in paths:
        rel = str(path.relative_to(ROOT)) if ROOT in path.parents else str(path)
        hits += [(rel, 0, n) for n in names if n in path.name.lower()]
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary data
        for no, line in enumerate(text.lower().splitlines(), 1):
            hits += [(rel, no, n) for n in names if n in line]
    return hits


def test_generic_code_names_no_flaw():
    files = list(generic_files())
    assert any(p.name == "synthetic.py" for p in files) and any(p.suffix == ".tmpl" for p in files)
    assert not any("priors" in p.relative_to(ROOT).parts for p in files)
    hits = flaw_name_hits(files, set(FLAW_NAMES) | arithmetic_flaw_signals())
    assert not hits, "flaw-specific names in generic code (move them to plugins/evo_plugins/priors or a domain):\n" + \
        "\n".join(f"  {f}:{n}: {name}" for f, n, name in hits)


def test_the_list_knows_the_arithmetic_flaws_signals():
    got = arithmetic_flaw_signals()
    assert {"numbers_found", "gold_listed", "span_hit", "trailing_chars", "record_match"} <= got


def test_the_scan_finds_a_planted_name(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "ok.py").write_text('SIGNALS = {"sim_count": 2}\n')
    (tmp_path / "pkg" / "bad.py").write_text('x = 1\nrate = r.signals["Answer_Count"]  # a hedged answer\n')
    (tmp_path / "pkg" / "gold_listed.tmpl").write_text("")
    (tmp_path / "priors").mkdir()
    (tmp_path / "priors" / "flaw.py").write_text("answer_hedging = 1\n")
    files = list(generic_files((tmp_path,), (tmp_path / "priors",)))
    hits = {(Path(f).name, n, name) for f, n, name in flaw_name_hits(files, set(FLAW_NAMES))}
    assert hits == {("bad.py", 2, "answer_count"), ("bad.py", 2, "hedg"), ("gold_listed.tmpl", 0, "gold_listed")}
