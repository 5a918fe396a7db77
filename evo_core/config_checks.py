"""Checks of a run config that need more than its own schema: the ``[rollout]`` table, and
every plugin the config names against what is installed. (``[distributed]`` is checked by
``DistributedSettings`` when the config is built.)

They run when a config file is loaded (``load_config``), so a typo'd
``harness.diagnostics.<name>``, ``sinks.<name>`` or ``rollout.engine`` fails in the first
second, before SFT or any model is built. Every error is one line that names the key and
lists the known values.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Optional

from evo_core.config_base import ConfigError



def _known(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none installed"


def check_rollout(table: Mapping[str, Any], policy_path: str = "") -> None:
    from evo_core.trainer.engine_factory import ENGINES, rollout_config, with_defaults

    engine = table.get("engine", "inprocess")
    if engine not in ENGINES:
        raise ConfigError(f"config key 'rollout.engine' must be one of {', '.join(ENGINES)}, got {engine!r}")
    try:
        rollout_config(with_defaults(table, policy_path))
    except (ValueError, TypeError) as exc:  # the engine's own message names the key
        raise ConfigError(f"config [rollout]: {exc}") from None


def check_plugin_names(cfg: Any, plugins: Any) -> None:
    """Every diagnostic, gate, proposer, intervention, backtester and sink the config names
    must be installed (``enabled = false`` entries and induced ``spec`` diagnostics excepted)."""
    h = cfg.harness or {}
    tables: list[tuple[str, str, Callable[[], Mapping[str, Any]]]] = [
        ("diagnostics", "diagnostic", plugins.diagnostics), ("gates", "gate", plugins.gates),
        ("proposers", "proposer", plugins.proposers), ("interventions", "intervention", plugins.interventions)]
    for table, what, getter in tables:
        configured = {n: p for n, p in (h.get(table) or {}).items()
                      if not (isinstance(p, Mapping) and (p.get("enabled") is False or p.get("spec")))}
        if not configured:
            continue
        installed = getter()
        _check_names(f"harness.{table}", what, configured, set(installed), plugins)
        for name, params in configured.items():
            check_plugin_params(f"harness.{table}.{name}", what, installed[name], params)
    plan = list((h.get("backtest") or {}).get("plan") or ())
    if plan:
        known = set(plugins.backtesters())
        for i, name in enumerate(plan):
            if name not in known:
                raise ConfigError(f"config key 'harness.backtest.plan[{i}]' names backtester {name!r}, which is not "
                                  f"installed (installed: {_known(known)})")
    sinks = [n for n, opts in (cfg.sinks or {}).items()
             if n != "run_id" and opts is not False and not (isinstance(opts, Mapping) and opts.get("enabled") is False)]
    known_sinks: Optional[set[str]] = plugins.sink_names() if sinks else None
    if known_sinks is not None:
        _check_names("sinks", "sink", sinks, known_sinks, plugins)


# keys of a plugin's table that the engine reads itself, not the plugin
RESERVED = {"diagnostic": ("enabled", "version", "spec"), "gate": ("enabled",), "proposer": ("enabled",),
            "intervention": ("enabled",)}


def check_plugin_params(where: str, what: str, plugin: Any, params: Any) -> None:
    """``[where]`` against the parameters ``plugin`` declares (``evo_core.api.params``)."""
    from evo_core.api.params import ParamError, check_params, declared_parameters

    given = {k: v for k, v in dict(params or {}).items() if k not in RESERVED.get(what, ())}
    try:
        check_params(declared_parameters(plugin), given)
    except ParamError as exc:
        msg = exc.message.replace("is not a parameter (", f"is not a parameter of {what} {plugin.name!r} (", 1)
        if msg == exc.message:
            msg = f"{msg} ({what} {plugin.name!r})"
        raise ConfigError(f"config key '{where}.{exc.key}' {msg}") from None
    except TypeError as exc:  # a declaration that is itself malformed
        raise ConfigError(f"config key {where!r}: the {what}'s parameter declaration is invalid: {exc}") from None


def _check_names(where: str, what: str, named: Iterable[str], known: set[str], plugins: Any = None) -> None:
    for name in named:
        if name not in known:
            # a plugin that failed to import may be the one that provides it: show its error, not "not installed"
            broken = [" ".join(e.split()) for e in getattr(plugins, "load_errors", None) or ()]
            if broken:
                raise ConfigError(f"config key '{where}.{name}': no {what} {name!r} is available, and "
                                  f"{'; '.join(broken)} (installed: {_known(known)})")
            raise ConfigError(f"config key '{where}.{name}': no {what} {name!r} is installed "
                              f"(installed: {_known(known)})")


def check_episodes(cfg: Any, plugins: Any) -> None:
    """``rl.rollout = "episode"`` needs a domain with ``run_episode`` (``evo_core.api.EpisodeDomain``).
    A domain that is not installed is left to the run's own error."""
    if getattr(cfg.rl, "rollout", "single") != "episode":
        return
    if cfg.rl.episode_max_turns < 0:
        raise ConfigError(f"config key 'rl.episode_max_turns' must be >= 0, got {cfg.rl.episode_max_turns}")
    from evo_core.api import supports_episodes

    domains = plugins.domains()
    domain = domains.get(cfg.task.domain)
    if domain is not None and not supports_episodes(domain):
        able = sorted(n for n, d in domains.items() if supports_episodes(d))
        raise ConfigError(f"config key 'rl.rollout' is 'episode', but domain {cfg.task.domain!r} has no run_episode "
                          f"(domains with episodes: {_known(able)})")


def check_config(cfg: Any, plugins: Optional[Any] = None) -> None:
    """All of the above; ``plugins`` defaults to the process-wide plugin manager."""
    check_rollout(cfg.rollout, cfg.policy.path)
    if plugins is None:
        from evo_core.plugins import get_plugin_manager

        plugins = get_plugin_manager()
    check_plugin_names(cfg, plugins)
    check_episodes(cfg, plugins)
