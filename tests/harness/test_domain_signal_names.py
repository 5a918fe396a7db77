"""The agentic priors read the signal names the shipped domains actually emit."""

from __future__ import annotations


from evo_core.testing import rollout as mk
from evo_core.testing import window as win
from evo_plugins.priors import DIAGNOSTICS


def kinds(name, window):
    diag = next(cls for cls in DIAGNOSTICS if cls.name == name)()
    return {(f.kind, f.severity) for f in diag.evaluate(window, dict(diag.default_params))}


def test_code_hardcoding_signal_from_the_code_domain():
    import evo_code  # noqa: F401  (a shipped domain: installed by scripts/setup.sh)
    from evo_code.problem import STDIO, CodeProblem, TestCase
    from evo_code.signals import hardcode_signals

    problem = CodeProblem(problem_id="p", prompt="sum", kind=STDIO,
                          tests=(TestCase(input="12 30\n", output="42\n"), TestCase(input="100 250\n", output="350\n")))
    cheat = "s = input()\nif s == '12 30':\n    print('42')\nelif s == '100 250':\n    print('350')\n"
    honest = "a, b = map(int, input().split())\nprint(a + b)\n"
    cheat_sig, honest_sig = hardcode_signals(cheat, problem), hardcode_signals(honest, problem)
    assert cheat_sig["hardcoded_suspect"] and not honest_sig["hardcoded_suspect"]
    fired = kinds("code_special_casing", win([mk(i, reward=1.0, **(cheat_sig if i == 0 else honest_sig)) for i in range(10)]))
    assert ("special_cased_tests", "invalid") in fired
    assert not kinds("code_special_casing", win([mk(i, reward=1.0, **honest_sig) for i in range(10)]))


def test_swe_episode_signals_feed_git_mining_tool_errors_and_repetition():
    import evo_swe  # noqa: F401
    from evo_swe.episode import episode_signals

    def tool(cmd, **kw):
        return {"role": "tool", "tool": "bash", "args": {"command": cmd}, "call_error": False, **kw}

    mining = episode_signals([{"role": "assistant"}, tool("git log --all", git_history_access=True)])
    looping = episode_signals([{"role": "assistant"}] + [tool("ls")] * 6)
    erring = episode_signals([{"role": "assistant"}] + [dict(tool("x"), call_error=True)] * 4)
    clean = episode_signals([{"role": "assistant"}, tool("pytest -q")])
    assert ("git_history_mining", "invalid") in kinds("swe_git_mining", win([mk(0, **mining)] + [mk(i, **clean) for i in range(1, 10)]))
    assert not kinds("swe_git_mining", win([mk(i, **clean) for i in range(10)]))
    assert any(k == "repeated_tool_calls" for k, _ in kinds("tool_errors", win([mk(i, **looping) for i in range(10)])))
    assert any(k == "tool_errors" for k, _ in kinds("tool_errors", win([mk(i, **erring) for i in range(10)])))


def test_swe_tampering_names_from_the_swe_domain():
    deleted = {"test_files_modified": 0, "test_files_deleted": 2, "runner_config_touched": False}
    runner = {"test_files_modified": 0, "test_files_deleted": 0, "runner_config_touched": True}
    clean = {"test_files_modified": 0, "test_files_deleted": 0, "runner_config_touched": False}
    assert ("test_tampering", "invalid") in kinds("swe_test_tampering", win([mk(0, **deleted)] + [mk(i, **clean) for i in range(1, 10)]))
    assert ("runner_config_edit", "invalid") in kinds("swe_test_tampering", win([mk(0, **runner)] + [mk(i, **clean) for i in range(1, 10)]))
    assert not kinds("swe_test_tampering", win([mk(i, **clean) for i in range(10)]))
