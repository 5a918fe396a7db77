"""``evo run CONFIG|NAME [--store URL] [--set key=value]... [--resume RUN] [--harness fixed|evolving]``."""

from __future__ import annotations

import contextlib
import json
from typing import List, Optional

import typer


def _display(bar: bool, log_every: int) -> object:
    """The rich bar only where someone watches a terminal; elsewhere (a pipe, CI, a log
    file, JSON logs) one structlog line every ``log_every`` steps."""
    from evo_core.logformat import log_format, stderr_is_terminal

    if bar and stderr_is_terminal() and log_format() == "console":
        from evo_core.trainer.progress import RunProgress

        return RunProgress()
    from evo_core.trainer.step_log import StepLog

    return StepLog(log_every)


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        config: str = typer.Argument(..., help="TOML run config file, or a shipped config by name (quickstart, recipes/math; evo config list)."),
        store: Optional[str] = typer.Option(None, "--store", help="Event store URL (default: $EVO_STORE or sqlite:///.evo/evo.sqlite)."),
        set_: List[str] = typer.Option([], "--set", help="Override a config key: --set rl.lr=3e-4 (repeatable)."),
        resume: Optional[str] = typer.Option(None, "--resume", help="Continue this run (id, unique prefix, @last, PREFIX@last) from its last committed step."),
        harness: Optional[str] = typer.Option(None, "--harness", help="Run only this harness arm (fixed, fixed+early-stop, reference, evolving, evolving/...)."),
        no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar (log lines instead)."),
        log_every: Optional[int] = typer.Option(None, "--log-every", min=1,
                                                help="Without a progress bar: one log line every N steps (default: run.log_every)."),
        as_json: bool = typer.Option(False, "--json", help="Print the outcome of each run as JSON."),
    ) -> None:
        """Train a policy with RL while the harness watches (one run per harness mode)."""
        from evo_core.cli.app import fail
        from evo_core.config import ConfigError, load_config
        from evo_core.shipped_configs import resolve_config
        from evo_core.loop import RunError, resume_run, run_all
        from evo_core.trainer.logs import configure_logging
        from evo_core.store import open_store

        from evo_core.logformat import LogFormatError

        try:
            configure_logging()
        except LogFormatError as exc:
            raise fail(str(exc))
        try:
            cfg = load_config(resolve_config(config), set_)
        except ConfigError as exc:
            raise fail(str(exc))
        from evo_core.harness.recipes import MissingPathError, check_paths

        try:  # every local path the config names must exist before anything is loaded
            check_paths(cfg.to_dict())
        except MissingPathError as exc:
            raise fail(str(exc))
        from evo_core.arms import ARMS

        if harness is not None and harness not in ARMS:
            raise fail(f"--harness must be one of {', '.join(ARMS)}, got {harness!r}")
        from evo_core.trainer.ranks import detect

        ranked = detect()  # started by torchrun / the deepspeed launcher: one process per rank
        leading = contextlib.nullcontext(None)
        if ranked is not None:
            from evo_core.trainer import launch

            try:
                comm = launch.join(cfg, ranked)
            except ValueError as exc:
                raise fail(str(exc))
            if not comm.leader:  # followers never open the store, print nothing, evaluate nothing
                raise typer.Exit(launch.run_follower(comm, cfg))
            leading = launch.leading(comm)
        elif (cfg.distributed or {}).get("engine") == "deepspeed":
            import structlog

            structlog.get_logger("evo.ranks").warning(
                'distributed: engine = "deepspeed" applies when a launcher starts the ranks (torchrun, deepspeed; '
                "--nproc_per_node 1 for one GPU); this plain run trains in one process without ZeRO")
        progress = _display(cfg.run.progress and not no_progress, log_every or cfg.run.log_every)
        from evo_core.run_setup import build_session
        from evo_core.store import StoreError
        from evo_core.trainer.ranks import RankLost

        with leading as leader:
            factory = leader.factory(build_session) if leader is not None else build_session
            try:
                st = open_store(store)
            except StoreError as exc:
                raise fail(str(exc))
            try:
                if resume:
                    from evo_core.store.runs import resolve_run

                    resume = resolve_run(st, resume)
                    outcomes = [resume_run(cfg, st, resume, progress=progress, harness=harness, session_factory=factory)]
                else:
                    outcomes = run_all(cfg, st, harness=harness, progress=progress, session_factory=factory)
            except (RunError, ConfigError, StoreError) as exc:
                raise fail(str(exc))
            except RankLost as exc:  # before the run loop (a start or a resume): nothing was sealed
                raise fail(str(exc), code=1)
            except KeyboardInterrupt as exc:  # the run was sealed as stopped; SIGTERM exits 128 + 15
                code = getattr(exc, "exit_code", 130)
                raise fail("terminated (SIGTERM)" if code == 143 else "interrupted", code=code)
            finally:
                st.close()
        rows = [{"run_id": o.run_id, "status": o.status, "steps": o.steps, **o.summary} for o in outcomes]
        if as_json:
            typer.echo(json.dumps(rows, default=str))
        else:
            from rich.table import Table

            from evo_core.cli.tables import print_table

            t = Table(title="runs")
            t.add_column("run", no_wrap=True, min_width=max((len(r["run_id"]) for r in rows), default=3))
            for col in ("status", "steps", "validation strict", "greedy strict", "train reward", "harness v", "diagnoses"):
                t.add_column(col)
            for r in rows:
                ev = r.get("final_eval") or {}
                fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
                t.add_row(r["run_id"], r["status"], str(r["steps"]), fmt(ev.get("strict_accuracy")),
                          fmt(ev.get("strict_accuracy_greedy")), fmt(ev.get("train_reward")),
                          str(r.get("harness_version", 0)), str(sum((r.get("diagnoses") or {}).values())))
            print_table(t)
