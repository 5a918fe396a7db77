"""Generic trajectory features: what an episode *did*, computed by the core from
``Completion.turns`` (keys: ``evo_core.api.trajectory.Turn``) and the episode's diff, the same
way for every episodic domain. They join the response features in ``RolloutCompleted.features``
and induction reads them as it reads any feature.

Class-free (every episode): ``traj_turns``, ``traj_agent_turns``, ``traj_tool_calls``,
``traj_distinct_tools``, ``traj_calls[<tool>]`` (one slot per tool name; the domain's declared
``tool_names`` always, else the names called, at most ``MAX_TOOL_SLOTS``) and
``traj_calls_unlisted`` (calls of any other name), ``traj_tool_errors``, ``traj_call_errors``,
``traj_error_share``, ``traj_repeated_calls`` (repeats of the most repeated identical call),
``traj_observation_chars``, ``traj_paths_touched``, ``traj_stop`` (the recorded stop reason),
and, when the episode has a diff, ``traj_diff_files`` and ``traj_diff_lines``.

With the domain's classifier: ``traj_calls_<class>`` per tool class (read, edit, verify,
submit, other), ``traj_verified_after_edit`` (a verify-class call came after the last
edit-class call that did not fail), ``traj_submitted`` (the last call is a submit-class call that did not fail),
``traj_edit_path_classes``, and per path class ``traj_edit_share[<class>]`` (the share of edit
calls on a path of that class) and ``traj_diff_share[<class>]`` (the share of the diff's
changed lines in files of that class).

Tool names, path classes and stop reasons are the domain's words: under
``signal_names = "hashed"`` they become opaque tokens (``evo_core.signal_names``), so no
generic code can key on them. Everything is bounded (the first ``MAX_TURNS`` turns, the diff's
first ``MAX_DIFF_CHARS`` characters, lengths of observations rather than their text) and a
missing or ill-typed key contributes nothing rather than failing: turns come from the policy.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Optional

import attrs

from evo_core.api.trajectory import TOOL_CLASSES, TrajectoryClassifier, trajectory_classifier_of
from evo_core.signal_names import MODES, opaque_name

MAX_TURNS = 512
MAX_DIFF_CHARS = 200_000
MAX_TOOL_SLOTS = 8
MAX_WORD = 40  # a domain word in a feature name (tool names come from the policy)
MAX_PATH = 1000
_PATH_CACHE = 4096


def _flag(v: Any) -> bool:
    return v is True or (type(v) is int and v != 0)


def _word(text: str) -> str:
    """A tool name or class as a short printable key part."""
    w = "".join(ch if ch.isprintable() and not ch.isspace() and ch not in "[]" else "_" for ch in text[:MAX_WORD])
    return w or "_"


def _scalar(v: Any) -> str:
    if isinstance(v, str):
        return v[:200]
    if v is None or isinstance(v, (bool, int, float)):
        return repr(v)
    return type(v).__name__  # nested values are not walked: they may be arbitrarily deep


def _call_key(tool: str, path: Optional[str], args: Mapping[str, Any]) -> str:
    items = sorted((str(k)[:50], _scalar(v)) for k, v in list(args.items())[:16])
    return f"{tool[:MAX_WORD]}|{path}|{items}"


def diff_lines_per_file(diff: str) -> dict[str, int]:
    """Changed (added + removed) lines per file of a unified diff (its first ``MAX_DIFF_CHARS``)."""
    out: dict[str, int] = {}
    cur: Optional[str] = None
    in_hunk = False
    for line in diff[:MAX_DIFF_CHARS].splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            cur = parts[1][:MAX_PATH] if len(parts) == 2 else line[11:][:MAX_PATH]
            out.setdefault(cur, 0)
            in_hunk = False
        elif line.startswith("+++ ") and not in_hunk:
            name = line[4:].split("\t", 1)[0]
            if name != "/dev/null":
                new = (name[2:] if name.startswith("b/") else name)[:MAX_PATH]
                if cur is not None and cur != new:
                    out[new] = out.pop(cur, 0)
                cur = new
                out.setdefault(cur, 0)
        elif line.startswith("--- ") and not in_hunk:
            name = line[4:].split("\t", 1)[0]
            if cur is None and name != "/dev/null":
                cur = (name[2:] if name.startswith("a/") else name)[:MAX_PATH]
                out.setdefault(cur, 0)
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and cur is not None and line[:1] in ("+", "-"):
            out[cur] += 1
    return out


@attrs.define
class TrajectoryFeaturizer:
    """Computes the features of one episode at a time; keeps what repeats across episodes (a
    path's class, a renamed word) so a step's episodes share the work. Build one per session
    with :func:`featurizer_for`."""

    classifier: Optional[TrajectoryClassifier] = None
    naming: str = attrs.field(default="plain")
    seed: int = 0
    domain_name: str = "?"
    _words: dict[str, str] = attrs.field(factory=dict, init=False)
    _paths: dict[str, str] = attrs.field(factory=dict, init=False)

    @naming.validator
    def _check(self, _: Any, value: str) -> None:
        if value not in MODES:
            raise ValueError(f"signal_names must be one of {', '.join(MODES)}, got {value!r}")

    def word(self, text: str) -> str:
        """A domain word (tool name, path class, stop reason) as it appears in features."""
        w = self._words.get(text)
        if w is None:
            w = _word(text) if self.naming == "plain" else opaque_name(text[:200], self.seed)
            if len(self._words) < _PATH_CACHE:
                self._words[text] = w
        return w

    def path_class(self, path: str) -> str:
        path = path[:MAX_PATH]
        c = self._paths.get(path)
        if c is None:
            assert self.classifier is not None
            c = self.classifier.classify_path(path)
            if not isinstance(c, str) or not c or len(c) > MAX_WORD:
                raise ValueError(f"domain {self.domain_name!r}: classify_path({path[:80]!r}) returned {c!r}; "
                                 f"expected a non-empty name of at most {MAX_WORD} characters")
            if len(self._paths) < _PATH_CACHE:
                self._paths[path] = c
        return c

    def tool_class(self, tool: str, args: Mapping[str, Any]) -> str:
        assert self.classifier is not None
        c = self.classifier.tool_class(tool, args)
        if c not in TOOL_CLASSES:
            raise ValueError(f"domain {self.domain_name!r}: tool_class({tool[:80]!r}, …) returned {c!r}; "
                             f"expected one of {', '.join(TOOL_CLASSES)}")
        return c

    def features(self, completion: Any) -> dict[str, Any]:
        """The episode's trajectory features (``evo_core.api.Completion``: its ``turns`` and
        ``workspace_diff``); {} for a completion without turns."""
        turns = getattr(completion, "turns", None)
        if not isinstance(turns, (tuple, list)) or not turns:
            return {}
        return self.of_turns(turns, diff=getattr(completion, "workspace_diff", None))

    def of_turns(self, turns: Iterable[Any], *, diff: Optional[str] = None) -> dict[str, Any]:
        seq = list(turns)
        cls = self.classifier
        agent = calls = errors = call_errors = obs = 0
        tools: Counter[str] = Counter()
        repeats: Counter[str] = Counter()
        paths: set[str] = set()
        classes: Counter[str] = Counter()
        edits_by_class: Counter[str] = Counter()
        last_edit = last_verify = -1
        last_class: Optional[str] = None
        last_failed = False
        stop: Optional[str] = None
        for i, t in enumerate(seq[:MAX_TURNS]):
            if not isinstance(t, Mapping):
                continue
            if t.get("role") == "assistant":
                agent += 1
            out = t.get("output")
            if isinstance(out, str):
                obs += len(out)
            if isinstance(t.get("stop_reason"), str):
                stop = t["stop_reason"]
            tool = t.get("tool")
            if not isinstance(tool, str):
                continue
            calls += 1
            failed = _flag(t.get("error"))
            errors += failed
            call_errors += _flag(t.get("call_error"))
            args = t.get("args")
            args = args if isinstance(args, Mapping) else {}
            path = t.get("path")
            path = path if isinstance(path, str) else args.get("path")
            path = path[:MAX_PATH] if isinstance(path, str) and path else None
            tools[tool[:200]] += 1
            repeats[_call_key(tool, path, args)] += 1
            if path is not None:
                paths.add(path)
            if cls is None:
                continue
            c = self.tool_class(tool, args)
            classes[c] += 1
            last_class, last_failed = c, failed or _flag(t.get("call_error"))
            if c == "edit":
                if not last_failed:  # a failed edit changed nothing a test run could have checked
                    last_edit = i
                if path is not None:
                    edits_by_class[self.path_class(path)] += 1
            elif c == "verify":
                last_verify = i
        f: dict[str, Any] = {
            "traj_turns": len(seq), "traj_agent_turns": agent, "traj_tool_calls": calls,
            "traj_distinct_tools": len(tools), "traj_tool_errors": errors, "traj_call_errors": call_errors,
            "traj_error_share": round(errors / calls, 4) if calls else 0.0,
            "traj_repeated_calls": max(repeats.values()) - 1 if repeats else 0,
            "traj_observation_chars": obs, "traj_paths_touched": len(paths),
        }
        f.update(self._tool_slots(tools))
        if stop is not None:
            f["traj_stop"] = self.word(stop)
        changed = diff_lines_per_file(diff) if isinstance(diff, str) else None
        if changed is not None:
            f["traj_diff_files"] = len(changed)
            f["traj_diff_lines"] = sum(changed.values())
        if cls is not None:
            f.update(self._classed(classes, edits_by_class, last_edit, last_verify, last_class, last_failed, changed))
        return f

    def _tool_slots(self, tools: Counter[str]) -> dict[str, int]:
        declared = tuple(getattr(self.classifier, "tool_names", None) or ())
        if declared:
            slots = list(dict.fromkeys(declared))
        else:  # the names called, most called first: a hostile policy cannot add unbounded keys
            slots = [n for n, _ in sorted(tools.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_TOOL_SLOTS]]
        out = {f"traj_calls[{self.word(n)}]": tools.get(n, 0) for n in slots}
        out["traj_calls_unlisted"] = sum(k for n, k in tools.items() if n not in set(slots))
        return out

    def _classed(self, classes: Counter[str], edits_by_class: Counter[str], last_edit: int, last_verify: int,
                 last_class: Optional[str], last_failed: bool, changed: Optional[dict[str, int]]) -> dict[str, Any]:
        f: dict[str, Any] = {f"traj_calls_{c}": classes.get(c, 0) for c in TOOL_CLASSES}
        f["traj_verified_after_edit"] = last_edit >= 0 and last_verify > last_edit
        f["traj_submitted"] = last_class == "submit" and not last_failed
        f["traj_edit_path_classes"] = len(edits_by_class)
        lines_by_class: Counter[str] = Counter()
        for path, n in (changed or {}).items():
            lines_by_class[self.path_class(path)] += n
        declared = tuple(getattr(self.classifier, "path_classes", None) or ())
        names = list(dict.fromkeys([*declared, *sorted(edits_by_class), *sorted(lines_by_class)]))
        edits = classes.get("edit", 0)
        total = sum(lines_by_class.values())
        for pc in names:
            w = self.word(pc)
            f[f"traj_edit_share[{w}]"] = round(edits_by_class.get(pc, 0) / edits, 4) if edits else 0.0
            if changed is not None:
                f[f"traj_diff_share[{w}]"] = round(lines_by_class.get(pc, 0) / total, 4) if total else 0.0
        return f


def featurizer_for(domain: Any, naming: str = "plain", seed: int = 0) -> TrajectoryFeaturizer:
    """The session's featurizer: the domain's classifier (if any) and the run's signal naming."""
    return TrajectoryFeaturizer(trajectory_classifier_of(domain), naming=naming, seed=int(seed),
                                domain_name=str(getattr(domain, "name", "?")))


def trajectory_features(turns: Iterable[Any], *, diff: Optional[str] = None,
                        classifier: Optional[TrajectoryClassifier] = None, naming: str = "plain",
                        seed: int = 0) -> dict[str, Any]:
    """The trajectory features of one episode's ``turns`` (and its diff), for tests and tools;
    the trainer keeps one :class:`TrajectoryFeaturizer` per session instead."""
    return TrajectoryFeaturizer(classifier, naming=naming, seed=seed).of_turns(turns, diff=diff)
