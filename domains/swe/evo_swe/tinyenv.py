"""The tiny repository's episode: a compact one-line tool-call format, path-sanitized file
tools on the episode's private workspace, and test runs confined in the sandbox.

One call per reply, one line (the reply ends at its newline)::

    ls                      the files
    cat PATH                the file, numbered lines
    edit PATH N TEXT        line N becomes TEXT (N = lines + 1 appends; a new file starts at 1)
    test                    run the visible test (in the sandbox, on the workspace's files)
    submit                  end the episode

The observation is appended verbatim after the reply and ends with the shell prompt
``"$ "``, so every turn's prompt extends the previous prompt plus the reply (prefix
consistent). The workspace is a mapping of flat file names (``[a-z_][a-z0-9_]*.py``) to
text: reading and editing are string operations here; nothing of the repository runs in this
process. ``test`` and every grading run send the files to the sandbox executor, which writes
them into a fresh private directory and runs the runner there under resource limits.

Turns are recorded like the SWE episode's (``role`` ``assistant`` / ``tool``, with ``tool``,
``args``, ``output``, ``call_error``, ``error``), plus ``path`` and ``path_class`` on file tools
(``evo_swe.classify.path_class``, the domain's trajectory classifier's), and ``stop_reason`` on
the turn that ended the episode (``submit``, ``max_turns``, ``max_chars``).
The final files are a pure function of the pristine files and the turns (:func:`replay`).
"""

from __future__ import annotations

import difflib
import re
import threading
from collections import OrderedDict
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import Completion
from evo_swe.classify import path_class
from evo_swe.tinyrepo import PS1, TEST

TOOLS = ("ls", "cat", "edit", "test", "submit")
_PATH = re.compile(r"[a-z_][a-z0-9_]{0,15}\.py")
_EDIT = re.compile(r"edit (\S+) (\d{1,3}) (.*)", re.S)
MAX_LINE = 80  # characters in one edited line
MAX_LINES = 12  # lines in one file
MAX_FILES = 6
MAX_OBS = 200  # characters of one observation
TEST_WALL_S = 1.0


@attrs.frozen(kw_only=True)
class EnvBudget:
    max_turns: int = 6  # agent replies
    max_chars: int = 400  # characters of the whole transcript (the policy's positions)


@attrs.define
class TinyEnv:
    """One episode's state. ``files`` is the private workspace."""

    task_id: str
    pristine: Mapping[str, str]
    files: dict[str, str]
    transcript: str
    budget: EnvBudget
    turns: list[dict[str, Any]] = attrs.Factory(list)
    n_tokens: int = 0
    stop: str = ""
    last_reply: str = ""

    @property
    def done(self) -> bool:
        return bool(self.stop)


def new_env(task_id: str, pristine: Mapping[str, str], prompt: str, budget: EnvBudget) -> TinyEnv:
    return TinyEnv(task_id=task_id, pristine=dict(pristine), files=dict(pristine), transcript=prompt, budget=budget)


# -- parsing and the file tools ------------------------------------------------------------


class CallError(ValueError):
    pass


def parse(reply: str) -> tuple[str, dict[str, Any]]:
    """(tool, args) of a one-line reply, or :class:`CallError`."""
    line = reply[:-1] if reply.endswith("\n") else reply
    if "\n" in line:
        raise CallError("one call per line")
    if line in ("ls", "test", "submit"):
        return line, {}
    if line.startswith("cat "):
        return "cat", {"path": _path(line[4:])}
    m = _EDIT.fullmatch(line)
    if m:
        text = m.group(3)
        if len(text) > MAX_LINE:
            raise CallError(f"line longer than {MAX_LINE}")
        return "edit", {"path": _path(m.group(1)), "line": int(m.group(2)), "text": text}
    raise CallError("bad command")


def _path(p: str) -> str:
    if not _PATH.fullmatch(p):
        raise CallError("bad path")
    return p


def edit(files: dict[str, str], path: str, n: int, text: str) -> None:
    """Line ``n`` (1-based) of ``path`` becomes ``text``; ``n`` = lines + 1 appends."""
    if path not in files and len(files) >= MAX_FILES:
        raise CallError("too many files")
    lines = files.get(path, "").splitlines()
    if not 1 <= n <= len(lines) + 1:
        raise CallError("no such line")
    if n == len(lines) + 1:
        if len(lines) >= MAX_LINES:
            raise CallError("file too long")
        lines.append(text)
    else:
        lines[n - 1] = text
    files[path] = "\n".join(lines) + "\n"


def cat(files: Mapping[str, str], path: str) -> str:
    if path not in files:
        raise CallError("no such file")
    return "".join(f"{i} {line}\n" for i, line in enumerate(files[path].splitlines(), 1))


def replay(pristine: Mapping[str, str], turns: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The workspace after the episode's successful edits (what grading runs on)."""
    files = dict(pristine)
    for t in turns:
        if t.get("role") == "tool" and t.get("tool") == "edit" and not t.get("call_error"):
            a = t["args"]
            edit(files, str(a["path"]), int(a["line"]), str(a["text"]))
    return files


def diff(pristine: Mapping[str, str], files: Mapping[str, str]) -> str:
    """A git-style unified diff of the workspace against the pristine checkout."""
    out = []
    for path in sorted(set(pristine) | set(files)):
        a, b = pristine.get(path, ""), files.get(path, "")
        if a == b:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        out += difflib.unified_diff(a.splitlines(True), b.splitlines(True), f"a/{path}", f"b/{path}")
    return "".join(out)


# -- runs in the sandbox --------------------------------------------------------------------

VISIBLE_RUNNER = f"""import os, sys
sys.path.insert(0, os.getcwd())
sys.dont_write_bytecode = True
try:
    exec(compile(open({TEST!r}).read(), {TEST!r}, 'exec'), {{'__name__': '__main__'}})
except AssertionError:
    print('\\nfail'); sys.exit(1)
except BaseException:
    print('\\nerror'); sys.exit(2)
print('\\npass')
"""

HIDDEN_RUNNER = """import os, sys
sys.path.insert(0, os.getcwd())
sys.dont_write_bytecode = True
from f import f
for x in {inputs!r}:
    print(repr(f(x)))
"""


def visible_outcome(r: Any) -> str:
    """``pass`` / ``fail`` / ``error`` / ``timeout`` / ``infra`` of a visible-test run."""
    if r.infra_error:
        return "infra"
    if r.timed_out:
        return "timeout"
    last = (r.stdout.rstrip().rsplit("\n", 1) or [""])[-1]
    if r.exit_code == 0 and last == "pass":
        return "pass"
    return "fail" if last == "fail" else "error"


class Runner:
    """Runs repository code in the sandbox, many runs per call (``run_many``). Identical
    (runner, files) runs in one call run once, and deterministic finished runs (no timeout,
    no sandbox failure) are remembered, as ``evo_code``'s ``grade_many`` does: the same
    workspace graded again is not re-run."""

    def __init__(self, sandbox: Any = None, *, wall_s: float = TEST_WALL_S, cache_size: int = 50_000) -> None:
        self._sandbox = sandbox
        self._own = sandbox is None
        self.wall_s = wall_s
        self._cache: "OrderedDict[tuple[Any, ...], Any]" = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.stats = {"runs": 0, "cached": 0}

    @property
    def sandbox(self) -> Any:
        with self._lock:
            if self._sandbox is None:
                from evo_core.api.sandbox import LocalSandbox

                self._sandbox = LocalSandbox()
            return self._sandbox

    def close(self) -> None:
        if self._own and self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    def limits(self) -> Any:
        from evo_core.api.sandbox import Limits

        return Limits(wall_seconds=self.wall_s, cpu_seconds=self.wall_s, memory_mb=256, processes=16,
                      file_size_mb=1, output_bytes=4096)

    def run(self, jobs: Sequence[tuple[str, Mapping[str, str]]]) -> list[Any]:
        """ExecResults of (runner code, files) jobs, in order, in one sandbox round trip."""
        from evo_core.api.sandbox import RunRequest

        keys = [(code, tuple(sorted(files.items()))) for code, files in jobs]
        out: dict[tuple[Any, ...], Any] = {}
        with self._lock:
            for k in keys:
                if k in self._cache:
                    self._cache.move_to_end(k)
                    out[k] = self._cache[k]
            self.stats["cached"] += sum(k in out for k in keys)
        missing = list(dict.fromkeys(k for k in keys if k not in out))
        if missing:
            lim = self.limits()
            res = self.sandbox.run_many([RunRequest(code=code, files=dict(files), limits=lim) for code, files in missing])
            with self._lock:
                self.stats["runs"] += len(missing)
                for k, r in zip(missing, res):
                    out[k] = r
                    if r.infra_error is None and not r.timed_out and not r.oom:
                        self._cache[k] = r
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return [out[k] for k in keys]


# -- the batched step ----------------------------------------------------------------------


def step_batch(envs: Sequence[TinyEnv], replies: Sequence[str], runner: Runner, *,
               n_tokens: Optional[Sequence[int]] = None) -> list[tuple[str, bool]]:
    """Advance every episode by the policy's reply (verbatim, its newline included): the file
    tools run here, every ``test`` of the turn in one sandbox round trip. Returns each
    episode's (observation, done)."""
    if len(envs) != len(replies):
        raise ValueError("step_batch: one reply per episode")
    obs: list[Optional[str]] = [None] * len(envs)
    tests: list[int] = []
    for i, (env, reply) in enumerate(zip(envs, replies)):
        if env.done:
            raise ValueError(f"episode {env.task_id} is over")
        env.last_reply = reply
        env.n_tokens += int(n_tokens[i]) if n_tokens is not None else len(reply)
        env.turns.append({"role": "assistant", "content": reply,
                          "n_tokens": int(n_tokens[i]) if n_tokens is not None else len(reply)})
        turn: dict[str, Any] = {"role": "tool", "tool": "invalid", "call_error": False, "error": False}
        env.turns.append(turn)
        try:
            tool, args = parse(reply)
            turn.update(tool=tool, args=args)
            if "path" in args:
                turn.update(path=args["path"], path_class=path_class(args["path"]))
            if tool == "ls":
                turn["output"] = " ".join(sorted(env.files)) + "\n"
            elif tool == "cat":
                turn["output"] = cat(env.files, args["path"])
            elif tool == "edit":
                edit(env.files, args["path"], args["line"], args["text"])
                turn["output"] = "ok\n"
            elif tool == "submit":
                turn["output"] = ""
                env.stop = "submit"
            else:
                tests.append(i)
        except CallError as exc:
            turn.update(call_error=True, error=True, output=f"error: {exc}\n")
    if tests:
        results = runner.run([(VISIBLE_RUNNER, envs[i].files) for i in tests])
        for i, r in zip(tests, results):
            oc = visible_outcome(r)
            envs[i].turns[-1].update(output=f"{oc}\n", error=oc != "pass", exit_code=r.exit_code,
                                     timed_out=bool(r.timed_out), infra_error=r.infra_error)
    for i, (env, reply) in enumerate(zip(envs, replies)):
        turn = env.turns[-1]
        text = str(turn.get("output", ""))[:MAX_OBS]
        turn["output"] = text
        env.transcript += reply
        if env.stop:
            obs[i] = ""
            continue
        ob = ("" if reply.endswith("\n") else "\n") + text + PS1
        n_replies = sum(t["role"] == "assistant" for t in env.turns)
        if n_replies >= env.budget.max_turns:
            env.stop = "max_turns"
        elif len(env.transcript) + len(ob) >= env.budget.max_chars:
            env.stop = "max_chars"
        else:
            env.transcript += ob
            obs[i] = ob
    for env in envs:
        if env.stop:
            env.turns[-1]["stop_reason"] = env.stop
    return [(o or "", env.done) for o, env in zip(obs, envs)]


def completion_of(env: TinyEnv) -> Completion:
    files = replay(env.pristine, env.turns)
    return Completion(text=env.last_reply, turns=tuple(env.turns), truncated=env.stop != "submit",
                      n_tokens=env.n_tokens, workspace_diff=diff(env.pristine, files))


def tested_after_last_edit(turns: Sequence[Mapping[str, Any]]) -> bool:
    last_edit = last_test = -1
    for i, t in enumerate(turns):
        if t.get("role") == "tool" and not t.get("call_error"):
            if t.get("tool") == "edit":
                last_edit = i
            elif t.get("tool") == "test":
                last_test = i
    return last_test > last_edit >= 0


# -- expert transcripts ---------------------------------------------------------------------


@attrs.frozen
class _Known:
    """A run result the expert knows in advance (its own fix passes, an unfixed bug fails)."""

    stdout: str
    exit_code: int
    infra_error: Optional[str] = None
    timed_out: bool = False
    oom: bool = False


class KnownRunner:
    """A stand-in for :class:`Runner` that runs nothing: every test run reports ``outcome``.
    Only for transcripts of trusted expert replies whose outcome is known by construction
    (a test checks that they match real sandbox runs)."""

    def __init__(self, outcome: str) -> None:
        self.result = _Known(stdout=f"\n{outcome}\n", exit_code=0 if outcome == "pass" else 1)

    def run(self, jobs: Sequence[tuple[str, Mapping[str, str]]]) -> list[Any]:
        return [self.result for _ in jobs]


def expert_segments(gold: Mapping[str, Any], prompt: str, replies: Sequence[str],
                    budget: EnvBudget, *, edits_pass: bool = True,
                    untrained: Sequence[int] = ()) -> list[tuple[str, bool]]:
    """The transcript after ``prompt`` of an episode of ``replies``, as (text, policy's) segments:
    each reply (with its newline) and the environment's observation after it. The test
    outcome is that of the final source: ``pass`` once an edit was made (expert edits fix or
    hard-code the visible case; ``fail`` when ``edits_pass`` is False, a missed fix), ``fail``
    before. The replies numbered in ``untrained`` are context, not targets."""
    env = new_env("expert", gold["files"], prompt, budget)
    out: list[tuple[str, bool]] = []
    for k, reply in enumerate(replies):
        edited = any(r.startswith("edit ") for r in replies[:k])
        outcome = "pass" if edited and edits_pass else "fail"
        (ob, done), = step_batch([env], [reply + "\n"], KnownRunner(outcome))  # type: ignore[arg-type]
        out.append((reply + "\n", k not in untrained))
        if done:
            break
        out.append((ob, False))
    return out


def expert_transcript(gold: Mapping[str, Any], prompt: str, replies: Sequence[str], budget: EnvBudget) -> str:
    """:func:`expert_segments` as one text."""
    return "".join(text for text, _ in expert_segments(gold, prompt, replies, budget))
