"""What an episode's turns may hold, and how a domain names the kinds of its tools and paths.

``Completion.turns`` is a tuple of mappings, one per turn. The core reads the keys of
:class:`Turn` from them to compute generic *trajectory features*
(``evo_core.api.features.trajectory_features``) for any episodic domain; every key is
optional, and a turn without a key simply contributes nothing to the features that need it
(never an error). Other keys are kept in the trajectory blob and ignored here.

A domain may also supply a :class:`TrajectoryClassifier` as ``domain.trajectory_classifier``:
which *class* of tool a call is (the core's fixed vocabulary :data:`TOOL_CLASSES`) and which
*class* of path a file is (the domain's own words, e.g. ``"test"``, ``"source"``,
``"config"``). Path classes, tool names and stop reasons are the domain's vocabulary: they
are renamed like signals under ``task.options.signal_names = "hashed"``, so generic code can
never key on them. A domain without a classifier still gets the class-free features.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Mapping, Optional, Protocol, Sequence, TypedDict, runtime_checkable

import attrs

__all__ = ["Turn", "TOOL_CLASSES", "TrajectoryClassifier", "RuleClassifier", "trajectory_classifier_of"]

#: The core's tool classes: what a call does, whatever the tool is called.
#: ``read`` looks (view a file, list a directory), ``edit`` changes the workspace, ``verify``
#: runs a check (the tests), ``submit`` ends the episode with an answer, ``other`` anything else.
TOOL_CLASSES = ("read", "edit", "verify", "submit", "other")


class Turn(TypedDict, total=False):
    """The keys a turn may carry (all optional).

    - ``role``: ``"system" | "user" | "assistant" | "tool" | "error"``; the policy's own
      replies are ``"assistant"``.
    - ``content``: the turn's text (the policy's reply).
    - ``tool``: the tool a call named (a turn with a string ``tool`` is one tool call; the
      domain may record it on the policy's turn or on the environment's answer, not both).
    - ``args``: the call's arguments (a mapping).
    - ``path``: the file the call read or wrote, where the domain knows it (else a string
      ``args["path"]`` is used).
    - ``output``: the observation the environment returned.
    - ``error``: the call failed (the tool ran and reported an error, or could not run).
    - ``call_error``: the call itself was malformed (unparsable, unknown tool, bad arguments).
    - ``stop_reason``: on the turn that ended the episode, why (``"submit"``, a budget...).
    - ``n_tokens``: tokens the policy generated in this turn.
    """

    role: str
    content: str
    tool: str
    args: Mapping[str, Any]
    path: str
    output: str
    error: bool
    call_error: bool
    stop_reason: str
    n_tokens: int


@runtime_checkable
class TrajectoryClassifier(Protocol):
    """A domain's generic classifier of its episodes' calls and paths.

    Two optional attributes fix the feature keys: ``tool_names``, the domain's tool names
    (each gets a call count in every episode, 0 when not called; a name outside them counts
    as undeclared), and ``path_classes``, the classes ``classify_path`` may return (each gets
    its share features in every episode, 0 when absent)."""

    def tool_class(self, tool: str, args: Mapping[str, Any]) -> str:
        """The class (one of :data:`TOOL_CLASSES`) of a call of ``tool`` with ``args``
        (``args`` comes from the policy: treat it as hostile; it is ``{}`` when the turn
        has no mapping of arguments)."""
        ...

    def classify_path(self, path: str) -> str:
        """The class of a file path, a short name of the domain's choosing (``"test"``,
        ``"source"``, ``"config"``, ``"other"``...)."""
        ...


@attrs.frozen(kw_only=True)
class RuleClassifier:
    """A :class:`TrajectoryClassifier` from rules: ``tools`` maps a tool name to its class
    (a name not listed is ``other``); ``paths`` is a sequence of ``(glob, class)`` tried in
    order against the path and its last component (``fnmatch``), else ``default_path``.
    ``commands`` maps a substring of a call's ``args[command_key]`` to a class, for shell
    tools whose class depends on the command (``{"pytest": "verify"}``); first match wins."""

    tools: Mapping[str, str] = attrs.field(factory=dict)
    paths: Sequence[tuple[str, str]] = ()
    default_path: str = "other"
    commands: Mapping[str, str] = attrs.field(factory=dict)
    command_key: str = "command"

    def __attrs_post_init__(self) -> None:
        bad = sorted({c for c in [*self.tools.values(), *self.commands.values()] if c not in TOOL_CLASSES})
        if bad:
            raise ValueError(f"RuleClassifier: tool classes must be among {', '.join(TOOL_CLASSES)}, got {bad}")

    @property
    def path_classes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([c for _, c in self.paths] + [self.default_path]))

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(self.tools)

    def tool_class(self, tool: str, args: Mapping[str, Any]) -> str:
        cmd = args.get(self.command_key) if isinstance(args, Mapping) else None
        if isinstance(cmd, str):
            for needle, cls in self.commands.items():
                if needle in cmd[:2000]:
                    return cls
        return self.tools.get(tool, "other")

    def classify_path(self, path: str) -> str:
        base = path.rsplit("/", 1)[-1]
        for pattern, cls in self.paths:
            if fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(base, pattern):
                return cls
        return self.default_path


def trajectory_classifier_of(domain: Any) -> Optional[TrajectoryClassifier]:
    """``domain.trajectory_classifier`` if it has one (checked), else None."""
    c = getattr(domain, "trajectory_classifier", None)
    if c is None:
        return None
    if not (callable(getattr(c, "tool_class", None)) and callable(getattr(c, "classify_path", None))):
        raise TypeError(f"domain {getattr(domain, 'name', domain)!r}: trajectory_classifier must have "
                        "tool_class(tool, args) and classify_path(path) (evo_core.api.TrajectoryClassifier), "
                        f"got {type(c).__name__}")
    return c
