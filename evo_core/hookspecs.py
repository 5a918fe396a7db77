"""Every hook a plugin can implement. One module, all prefixed ``evo_``.

A plugin is a module (or object) with functions decorated by ``evo_core.hookimpl``
and listed under the ``evo`` entry-point group:

    [project.entry-points.evo]
    my_plugin = "my_package.my_module"

Provider hooks (``evo_register_*``) return lists of objects; the plugin manager
collects them. ``evo_on_events`` sees every batch after it is committed.

There is one way to change training: an intervention (``evo_register_interventions``;
``evo_core.api.interventions``). The core applies it while the harness state lists it as
active, so what it does is logged, gated, replayable offline and revertible. A harness
promotion activates one, and so does ``[harness.interventions.NAME]`` in the run config (from
step 1). The five trainer hooks of earlier versions are gone (``REMOVED_HOOKS``): a plugin
that still implements one fails at load with the message below, never silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pluggy

if TYPE_CHECKING:
    from evo_events import Event
    # the api's own modules, not the package: ``evo_core.api`` re-exports ``hookimpl`` from here
    from evo_core.api.domain import Domain
    from evo_core.api.evidence import Diagnostic
    from evo_core.api.harness import Backtester, Gate, Proposer
    from evo_core.api.interventions import Intervention
    from evo_core.api.trainer import Sink

PROJECT = "evo"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --- providers ----------------------------------------------------------------------------


@hookspec
def evo_register_event_types() -> Sequence[type["Event"]]:
    """Return event classes this plugin defines (decorated with ``@event_type``).

    Their names must be namespaced with the plugin's own prefix, e.g. ``"myplugin.Thing"``;
    the ``evo.`` namespace is reserved for the core.
    """


@hookspec
def evo_register_domains() -> Sequence["Domain"]:
    """Return task domains (see ``evo_core.api.Domain``): task loading, the episode, a
    training verifier and a strict oracle. Optional methods a domain may add:
    ``configure(options)`` (the run's ``[task] options``), ``sft_target(task, rng, **options)`` (the SFT warm
    start's reference answer) and ``run_episode(task, policy, *, max_turns=None)``
    (``evo_core.api.EpisodeDomain``: multi-turn episodes, used under ``[rl] rollout = "episode"``)."""


@hookspec
def evo_register_diagnostics() -> Sequence["Diagnostic"]:
    """Return diagnostics (``evo_core.api.Diagnostic``; ``BaseDiagnostic`` supplies the
    defaults). Each has a unique ``name``, a ``version``, the ``kinds`` it reports, its
    ``parameters``, a pure ``evaluate(window, params)`` and ``measure(window, params, kind)``."""


@hookspec
def evo_register_interventions() -> Sequence["Intervention"]:
    """Return interventions (``evo_core.api.Intervention``; ``BaseIntervention`` supplies the
    defaults): ``name``, ``version``, ``kind`` (the family: reward_shaping, rollout_filter,
    curriculum, hyperparameter, prompt_hint, diagnostic, verifier), ``changes``, ``targets``,
    ``parameters`` and the effect methods the core applies while the harness state lists
    them as active (promoted by the harness, or named in ``[harness.interventions]``); an
    intervention implements no hook of its own."""


@hookspec
def evo_register_proposers() -> Sequence["Proposer"]:
    """Return proposers. ``propose(context) -> list[Proposal]`` turns diagnoses into
    intervention proposals; the do-not-repeat ledger filters them afterwards."""


@hookspec
def evo_register_backtesters() -> Sequence["Backtester"]:
    """Return backtesters. ``backtest(proposal, context) -> BacktestOutcome``: offline
    replay of history and/or an online branch A/B on held-out tasks."""


@hookspec
def evo_register_gates() -> Sequence["Gate"]:
    """Return gates. ``decide(candidate, context) -> GateDecision``. Validity vetoes
    outrank score: any gate's veto blocks promotion."""


@hookspec
def evo_register_sinks(config: Mapping[str, Any]) -> Sequence["Sink"]:
    """Return sinks configured from the run config's ``[sinks]`` table. A sink mirrors
    metrics and decisions; a sink that raises is recorded as ``PluginFailed``."""


@hookspec
def evo_sink_names() -> Sequence[str]:
    """Return the ``[sinks.NAME]`` tables this plugin's ``evo_register_sinks`` builds, so
    that a config naming an unknown sink fails at load (a typo must not silently log
    nowhere). A sink plugin without it turns that check off for every sink name."""


@hookspec
def evo_register_commands(app: Any) -> None:
    """Add subcommands to the ``evo`` typer app."""


# --- observation --------------------------------------------------------------------------


@hookspec
def evo_on_events(run_id: str, events: Sequence["Event"]) -> None:
    """Called after each batch of a run's events is committed to the log."""


# --- removed hooks ------------------------------------------------------------------------

_AS_INTERVENTION = ("register an intervention (evo_register_interventions) that defines `{effect}` "
                    "and activate it with [harness.interventions.NAME] in the run config (from step 1) "
                    "or let the harness promote it; it is then logged, gated and replayable")

REMOVED_HOOKS: Mapping[str, str] = {
    "evo_task_weights": "use an intervention: " + _AS_INTERVENTION.format(
        effect="task_weights(tasks, params) -> {task_id: weight}"),
    "evo_prompt_hint": "use an intervention: " + _AS_INTERVENTION.format(
        effect="prompt_hint(task, params) -> str | None"),
    "evo_hyperparameters": "use an intervention: " + _AS_INTERVENTION.format(
        effect="hyperparameters(current, params) -> overrides | None"),
    "evo_transform_rewards": "use an intervention: " + _AS_INTERVENTION.format(
        effect="new_reward(view, params) -> float | None (or regrade(view, params) -> bool)"),
    "evo_filter_rollouts": "use an intervention: " + _AS_INTERVENTION.format(
        effect="mask(views, params) -> set of rollout ids"),
}


def removed_hook_message(name: str, plugin: str = "") -> str:
    """The one-line error for a plugin that implements a hook this version removed.
    Raises ``KeyError`` for a name that was never a hook here (a typo is not a removal)."""
    how = REMOVED_HOOKS[name]
    who = f"plugin {plugin!r} implements " if plugin else ""
    return f"{who}{name}, a trainer hook that was removed: {how} (see docs/plugins.md)"


def removed_hooks_of(plugin: Any) -> list[str]:
    """The removed hooks ``plugin`` (a module or object) still implements, by ``@hookimpl``
    marker, so that the plugin manager can refuse it at load."""
    return sorted(n for n in REMOVED_HOOKS if hasattr(getattr(plugin, n, None), f"{PROJECT}_impl"))
