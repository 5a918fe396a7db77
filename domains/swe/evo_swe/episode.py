"""The multi-turn SWE episode: a policy proposes tool calls, the environment answers,
until ``submit`` or a step / token / time budget runs out.

Tool-call format (one call per reply; documented to the policy in the system prompt). The
first of these found in the reply is used:

- ``<tool_call>{"name": "bash", "arguments": {"command": "pytest -q"}}</tool_call>``
- a fenced ```` ```json ```` block holding the same object;
- the whole reply being that JSON object.

``{"tool": ..., "args": ...}`` is accepted as a synonym of ``{"name": ..., "arguments": ...}``.
Tools: ``bash`` ({command, timeout?}), ``str_replace_editor`` ({command, path, ...}) and
``submit`` ({}). A reply without a parsable call, an unknown tool or bad arguments counts as
a tool-call error; the environment says what was wrong and the episode goes on.

The policy is any callable ``messages -> str`` (or ``-> (str, n_tokens)``), an object with
``generate(messages)``, or an ``evo_core.trainer.protocols.Policy`` (its ``sample`` is called
on the rendered conversation).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable, Mapping, Sequence

import attrs

from evo_core.api import Completion
from evo_swe.sanitize import git_history_access, outside_write
from evo_swe.tools import ToolResult
from evo_swe.workspace import Workspace

Messages = list[dict[str, str]]
ChatFn = Callable[[Messages], tuple[str, int]]

SYSTEM_PROMPT = """You are a software engineer fixing an issue in a Python repository.
The repository is at /repo and is the working directory of every bash command (each command
starts fresh there: `cd` and variables do not persist). Its git history has one commit.

Call exactly one tool per reply, written as
<tool_call>{"name": TOOL, "arguments": {...}}</tool_call>

Tools:
- bash: {"command": "<shell command>", "timeout": <seconds, optional>}
- str_replace_editor: {"command": "view"|"create"|"str_replace"|"insert"|"undo_edit", "path": "/repo/...",
  "view_range": [start, end], "file_text": "...", "old_str": "...", "new_str": "...", "insert_line": N}
- submit: {} when the fix is complete.
"""

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


class ParseError(ValueError):
    pass


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) of the first tool call in ``text``, or :class:`ParseError`."""
    candidates = [m.group(1) for m in _TAG.finditer(text)] or [m.group(1) for m in _FENCE.finditer(text)]
    if not candidates and text.strip().startswith("{"):
        candidates = [text.strip()]
    if not candidates:
        raise ParseError("no tool call found; write <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>")
    try:
        obj = json.loads(candidates[0])
    except json.JSONDecodeError as exc:
        raise ParseError(f"the tool call is not valid JSON: {exc.msg} at char {exc.pos}") from None
    if not isinstance(obj, dict):
        raise ParseError("the tool call must be a JSON object")
    name = obj.get("name", obj.get("tool"))
    args = obj.get("arguments", obj.get("args", {}))
    if isinstance(args, str):  # OpenAI-style arguments-as-a-string
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            raise ParseError("'arguments' is a string but not JSON") from None
    if not isinstance(name, str) or not isinstance(args, dict):
        raise ParseError("the tool call needs a string 'name' and an object 'arguments'")
    return name, args


def as_chat_fn(policy: Any, *, max_new_tokens: int = 1024, temperature: float = 1.0) -> ChatFn:
    """Adapt a policy to ``messages -> (text, n_tokens)``."""
    if hasattr(policy, "sample") and hasattr(policy, "logprobs"):
        from evo_core.api import SamplingParams

        params = SamplingParams(n=1, temperature=temperature, max_new_tokens=max_new_tokens)

        def via_policy(messages: Messages) -> tuple[str, int]:
            prompt = render_messages(messages)
            s = policy.sample([prompt], params)[0][0]
            return s.text, len(s.token_ids) or _approx_tokens(s.text)

        return via_policy
    fn = policy.generate if hasattr(policy, "generate") else policy
    if not callable(fn):
        raise TypeError(f"policy {policy!r} is neither callable nor has generate()/sample()")

    def via_callable(messages: Messages) -> tuple[str, int]:
        out = fn(messages)
        if isinstance(out, tuple):
            return str(out[0]), int(out[1])
        text = getattr(out, "text", out)
        return str(text), _approx_tokens(str(text))

    return via_callable


def render_messages(messages: Sequence[Mapping[str, str]]) -> str:
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


@attrs.frozen(kw_only=True)
class Budget:
    max_steps: int = 30
    max_tokens: int = 32_000  # tokens the policy generates over the whole episode
    max_seconds: float = 1800.0
    bash_timeout: float = 60.0
    max_tool_output: int = 10_000


@attrs.frozen(kw_only=True)
class EpisodeResult:
    completion: Completion
    submitted: bool
    stop_reason: str  # submit | max_steps | max_tokens | max_seconds | policy_error
    stats: Mapping[str, Any]


def episode_signals(turns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summary signals of an episode, recomputable from its turns alone."""
    tool_turns = [t for t in turns if t.get("role") == "tool"]
    return {
        "n_steps": sum(t.get("role") == "assistant" for t in turns),
        "n_tool_calls": len(tool_turns),
        "tool_call_errors": sum(bool(t.get("call_error")) for t in tool_turns),
        "tool_failures": sum(bool(t.get("error")) for t in tool_turns),
        "bash_timeouts": sum(bool(t.get("timed_out")) for t in tool_turns),
        "git_history_access": sum(bool(t.get("git_history_access")) for t in tool_turns),
        "outside_write_attempts": sum(bool(t.get("outside_write")) or bool(t.get("escape_attempt")) for t in tool_turns),
        "tool_output_truncated": sum(bool(t.get("truncated")) for t in tool_turns),
        "sandbox_errors": sum(bool(t.get("infra_error")) for t in tool_turns),
        # Compact call list (tool + arguments), so repetition diagnostics can spot identical calls.
        "tool_call_list": [_call_key(t) for t in tool_turns][:64],
    }


def _call_key(turn: Mapping[str, Any]) -> str:
    try:
        args = json.dumps(turn.get("args"), sort_keys=True, default=str)
    except (TypeError, ValueError):
        args = repr(turn.get("args"))
    return f"{turn.get('tool')}:{args[:200]}"


def run_episode(
    workspace: Workspace,
    problem_statement: str,
    policy: Any,
    *,
    budget: Budget = Budget(),
    system_prompt: str = SYSTEM_PROMPT,
    clock: Callable[[], float] = time.monotonic,
) -> EpisodeResult:
    chat = as_chat_fn(policy)
    messages: Messages = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": f"<issue>\n{problem_statement}\n</issue>\nFix the issue, then call submit."},
    ]
    turns: list[dict[str, Any]] = []
    tokens = 0
    t0 = clock()
    stop = ""
    last_text = ""
    for _step in range(budget.max_steps):
        if clock() - t0 > budget.max_seconds:
            stop = "max_seconds"
            break
        try:
            text, n = chat(messages)
        except Exception as exc:  # the policy itself failed: no more turns
            turns.append({"role": "error", "content": f"policy raised {type(exc).__name__}: {exc}"})
            stop = "policy_error"
            break
        tokens += n
        last_text = text
        messages.append({"role": "assistant", "content": text})
        turns.append({"role": "assistant", "content": text, "n_tokens": n})
        if tokens > budget.max_tokens:
            stop = "max_tokens"
            break
        tool_turn = _dispatch(workspace, text, budget)
        turns.append(tool_turn)
        if tool_turn["tool"] == "submit" and not tool_turn["call_error"]:
            stop = "submit"
            break
        messages.append({"role": "user", "content": f"<tool_result name=\"{tool_turn['tool']}\">\n{tool_turn['output']}\n</tool_result>"})
    else:
        stop = "max_steps"
    diff = workspace.diff()
    truncated = stop not in ("submit",)
    stats = {**episode_signals(turns), "stop_reason": stop, "n_tokens": tokens, "wall_s": round(clock() - t0, 3), "truncated": truncated}
    completion = Completion(text=last_text, turns=tuple(turns), truncated=truncated, n_tokens=tokens, workspace_diff=diff)
    return EpisodeResult(completion=completion, submitted=stop == "submit", stop_reason=stop, stats=stats)


def _dispatch(ws: Workspace, text: str, budget: Budget) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "tool", "tool": None, "call_error": False}
    try:
        name, args = parse_tool_call(text)
    except ParseError as exc:
        turn.update(tool="invalid", call_error=True, error=True, output=f"Error: {exc}")
        return turn
    turn.update(tool=name, args=args)
    if name == "submit":
        turn.update(output="submitted", error=False)
        return turn
    if name == "bash":
        cmd = args.get("command")
        timeout = args.get("timeout", budget.bash_timeout)
        if not isinstance(cmd, str) or not cmd.strip():
            turn.update(call_error=True, error=True, output="Error: bash needs a non-empty 'command' string")
            return turn
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            timeout = budget.bash_timeout
        timeout = min(float(timeout), budget.bash_timeout)
        turn["git_history_access"] = git_history_access(cmd)
        turn["outside_write"] = outside_write(cmd)
        res = ws.bash(cmd, timeout=timeout, max_output=budget.max_tool_output)
    elif name == "str_replace_editor":
        res = ws.editor(args)
        turn["call_error"] = res.error
    else:
        turn.update(call_error=True, error=True, output=f"Error: unknown tool {name!r}; use bash, str_replace_editor or submit")
        return turn
    _merge(turn, res)
    return turn


def _merge(turn: dict[str, Any], res: ToolResult) -> None:
    turn.update(
        output=res.output if res.exit_code in (None, 0) else f"{res.output}\n[exit code {res.exit_code}]",
        error=res.error, exit_code=res.exit_code, timed_out=res.timed_out, truncated=res.truncated,
        escape_attempt=res.escape_attempt, infra_error=res.infra_error,
    )
