"""The environment cache (offline, cached, tamper-checked) and the sandboxed tree executor."""

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from evo_swe.envs import EnvBuildError, EnvCache, EnvSpec


def make_wheel(dest: Path) -> None:
    """A minimal pure-Python wheel built by hand (no build backend, no network)."""
    dest.mkdir(parents=True, exist_ok=True)
    files = {
        "tinydep/__init__.py": "VALUE = 42\n",
        "tinydep-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n",
        "tinydep-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: evo-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{n},,\n" for n in files) + "tinydep-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(dest / "tinydep-1.0-py3-none-any.whl", "w") as zf:
        for n, text in files.items():
            zf.writestr(n, text)
        zf.writestr("tinydep-1.0.dist-info/RECORD", record)


def run_py(env, code):
    return subprocess.run([str(env.python), "-c", code], capture_output=True, text=True, env={**os.environ, **env.env_vars()})


def test_env_is_built_once_offline_and_rebuilt_when_tampered(swe_root, tmp_path):
    cache = EnvCache(swe_root / "envcache")
    wh = tmp_path / "wheels"
    make_wheel(wh)
    src = tmp_path / "src"
    src.mkdir()
    (src / "marker.txt").write_text("from the base tree")
    spec = EnvSpec(repo="local/tiny", version="1.0", requirements=("tinydep",), wheelhouse=str(wh),
                   setup=("python -c \"import sys, pathlib; pathlib.Path(sys.prefix, 'setup-ran').write_text(open('marker.txt').read())\"",))
    env, rebuilt = cache.get(spec, src)
    assert not rebuilt and cache.is_ready(spec)
    r = run_py(env, "import tinydep, pytest, sys; print(tinydep.VALUE, sys.prefix)")
    assert r.returncode == 0 and r.stdout.split()[0] == "42", r.stderr
    assert (env.path / "setup-ran").read_text() == "from the base tree"
    # Cached: a second get reuses it untouched.
    stamp = (env.path / ".evo-env.json").stat().st_mtime_ns
    env2, _ = cache.get(spec, src)
    assert env2.path == env.path and (env.path / ".evo-env.json").stat().st_mtime_ns == stamp
    # A different version is a different env.
    assert cache.path_for(EnvSpec(repo="local/tiny", version="2.0")) != env.path
    # Poisoning the cached env (what `pip install` by an agent would do) is detected.
    site = next(env.path.glob("lib/python*/site-packages"))
    (site / "evil.pth").write_text("import os\n")
    assert not cache.is_ready(spec)
    env3, rebuilt = cache.get(spec, src)
    assert rebuilt and not (site / "evil.pth").exists() and cache.is_ready(spec)


def test_requirements_need_a_wheelhouse(swe_root):
    cache = EnvCache(swe_root / "envcache")
    with pytest.raises(EnvBuildError, match="wheelhouse"):
        cache.get(EnvSpec(repo="local/x", requirements=("requests",)))
    with pytest.raises(EnvBuildError, match="setup command"):
        cache.get(EnvSpec(repo="local/y", setup=("exit 3",)), Path("/work/main/domains/swe/tests/fixtures/minilib"))


@pytest.fixture
def tree(tmp_path):
    t = tmp_path / "tree"
    t.mkdir()
    (t / "a.txt").write_text("hello\n")
    return t


def test_executor_timeout_kills_the_process_group(executor, tree):
    r = executor.run(tree, ["bash", "-c", "sleep 300 & sleep 300; echo never"], timeout=1.5)
    assert r.timed_out and r.infra_error is None and "never" not in r.output
    assert r.wall_time < 60


def test_executor_background_child_does_not_block(executor, tree):
    r = executor.run(tree, ["bash", "-c", "(sleep 300 &) ; echo started"], timeout=30)
    assert not r.timed_out and r.exit_code == 0 and "started" in r.output and r.wall_time < 20


def test_executor_truncates_output_and_syncs_the_tree(executor, tree):
    r = executor.run(tree, ["bash", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo; echo new > b.txt"], timeout=30,
                     max_output=1000, sync_back=True)
    assert r.output_truncated and len(r.output) < 1200 and "bytes truncated" in r.output
    from evo_swe.executor import replace_tree

    refused = replace_tree(tree, r.tree_tar)
    assert refused == [] and (tree / "b.txt").read_text() == "new\n" and (tree / "a.txt").exists()


def test_workspace_refuses_links_out_and_host_writes(grader, median_task, tmp_path):
    from evo_swe.workspace import Workspace

    env, _ = grader.env(median_task)
    with Workspace.create(grader.pristine(median_task), env, grader.executor) as ws:
        r = ws.bash("ln -s /etc/passwd leak; ln -s ../../.. up; echo x > /work/main/PWNED_SWE; touch ok.txt; ls")
        assert "leak" in r.output  # inside the sandbox the link existed ...
        assert not (ws.path / "leak").exists() and not (ws.path / "leak").is_symlink()  # ... it never reached the host
        assert not (ws.path / "up").is_symlink() and (ws.path / "ok.txt").exists()
        assert r.escape_attempt and len(ws.refused_members) == 2
        assert not Path("/work/main/PWNED_SWE").exists()
        assert "ok.txt" in ws.diff()


def test_concurrent_grades_share_one_env_build(swe_root, executor, median_task):
    """Training grades in parallel: the first grades race to build the pristine snapshot and
    the environment; the locks make exactly one build, and every verdict is right."""
    from concurrent.futures import ThreadPoolExecutor

    from evo_swe.grading import Grader

    g = Grader(cache_dir=swe_root / "concurrent-cache", executor=executor, timeout=120)
    diffs = [median_task.patch, "", median_task.patch, ""]
    with ThreadPoolExecutor(4) as pool:
        reports = list(pool.map(lambda d: g.grade(median_task, d), diffs))
    assert [r.resolved for r in reports] == [True, False, True, False]
    assert len(list((swe_root / "concurrent-cache" / "envs").glob("*/.evo-env.json"))) == 1
    assert len([p for p in (swe_root / "concurrent-cache" / "pristine").iterdir() if p.is_dir()]) == 1
