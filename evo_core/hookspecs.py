"""Every hook a plugin can implement. One module, all prefixed ``evo_``.

A plugin is a module (or object) with functions decorated by ``evo_core.hookimpl``
and listed under the ``evo`` entry-point group:

    [project.entry-points.evo]
    my_plugin = "my_package.my_module"

Provider hooks (``evo_register_*``) return lists of objects; the plugin manager
collects them. Trainer hooks run inside every step in this order:
``evo_task_weights`` → ``evo_prompt_hint`` → ``evo_hyperparameters`` → sampling and
verification → ``evo_transform_rewards`` → ``evo_filter_rollouts`` → advantages and
the update. ``evo_on_events`` sees every batch after it is committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

import pluggy

if TYPE_CHECKING:
    from evo_events import Event
    # the api's own modules, not the package: ``evo_core.api`` re-exports ``hookimpl`` from here
    from evo_core.api.domain import Domain, Task
    from evo_core.api.evidence import Diagnostic
    from evo_core.api.harness import Backtester, Gate, Proposer
    from evo_core.api.interventions import Intervention
    from evo_core.api.trainer import RolloutBatch, Sink
    from evo_core.state import HarnessState

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
    them as active."""


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


# --- trainer hook points (interventions act here) -----------------------------------------


@hookspec
def evo_task_weights(tasks: Sequence["Task"], state: "HarnessState", step: int) -> Optional[Mapping[str, float]]:
    """Return task id → weight multipliers for sampling this step (curriculum), or None.
    The trainer multiplies the weights that all plugins return."""


@hookspec
def evo_prompt_hint(task: "Task", state: "HarnessState") -> Optional[str]:
    """Return a system hint to add to this task's prompt, or None. Hints are joined in
    plugin order."""


@hookspec
def evo_hyperparameters(params: Mapping[str, Any], state: "HarnessState", step: int) -> Optional[Mapping[str, Any]]:
    """Return hyperparameter overrides for this step (temperature, clip, kl_coef,
    max_new_tokens, …), or None. Later plugins' overrides win."""


@hookspec
def evo_transform_rewards(batch: "RolloutBatch", state: "HarnessState") -> None:
    """Change ``item.reward`` in place: penalties, shaping, stricter verification.
    Never turn an infrastructure error (``reward is None``) into a score."""


@hookspec
def evo_filter_rollouts(batch: "RolloutBatch", state: "HarnessState") -> None:
    """Set ``item.mask = False`` on rollouts to drop from the loss (dynamic sampling,
    overlong masking)."""


# --- observation --------------------------------------------------------------------------


@hookspec
def evo_on_events(run_id: str, events: Sequence["Event"]) -> None:
    """Called after each batch of a run's events is committed to the log."""
