"""``evo export RUN [--policy-version N | --main] -o DIR [--adapter]``."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export_cmd(
        run_id: str = typer.Argument(..., metavar="RUN", help="The run whose policy to export: id, unique prefix, @last or PREFIX@last."),
        output: str = typer.Option(..., "-o", "--output", help="Directory to write (transformers save_pretrained layout)."),
        policy_version: Optional[int] = typer.Option(None, "--policy-version", help="Export this policy version."),
        main: bool = typer.Option(False, "--main", help="Export the main line: the last version a policy gate promoted (the default)."),
        adapter: bool = typer.Option(False, "--adapter", help="LoRA runs: write the adapter alone instead of merged weights."),
        store: Optional[str] = typer.Option(None, "--store", help="Event store URL (default: $EVO_STORE or sqlite:///.evo/evo.sqlite)."),
        device: str = typer.Option("cpu", "--device", help="torch device to rebuild the model on."),
        force: bool = typer.Option(False, "--force", help="Replace a non-empty output directory."),
        no_record: bool = typer.Option(False, "--no-record", help="Do not append PolicyExported to the run's export stream."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Write a run's policy as a transformers directory and log PolicyExported (stream export-RUN).

        AutoModelForCausalLM and AutoTokenizer load the directory offline; `evo serve DIR` serves it.
        """
        from evo_core.cli.app import fail
        from evo_core.export import ExportError, export_policy
        from evo_core.store import open_store

        if policy_version is not None and main:
            raise fail("give --policy-version N or --main, not both")
        if policy_version is not None and policy_version < 0:
            raise fail(f"--policy-version must be >= 0, got {policy_version}")
        from evo_core.cli.runnames import run_arg

        st = open_store(store)
        try:
            run_id = run_arg(st, run_id)
            # stdout carries the result only: DeepSpeed (imported by transformers on save) logs to stdout
            with contextlib.redirect_stdout(sys.stderr):
                res = export_policy(st, run_id, output, policy_version=policy_version, main=main, adapter=adapter,
                                    device=device, record=not no_record, overwrite=force)
        except ExportError as exc:
            raise fail(str(exc))
        finally:
            st.close()
        r = res.resolved
        source = r.checkpoint.digest if r.checkpoint else str((r.checkpoint_file or {}).get("path"))
        row = {"run_id": r.run_id, "policy_version": r.policy_version, "main": r.main, "digest": r.digest,
               "checkpoint": source, "source": r.source, "output_dir": res.output_dir,
               "adapter": res.adapter, "merged": res.merged, "files": list(res.files),
               "event_id": res.event.event_id if res.event else None}
        if as_json:
            typer.echo(json.dumps(row))
            return
        what = "LoRA adapter" if res.adapter else ("merged LoRA weights" if res.merged else "weights")
        line = (f"exported run {r.run_id} policy v{r.policy_version}{' (main line)' if r.main else ''}: {what} "
                f"{r.digest[:12] or '?'} from checkpoint {source if r.checkpoint is None else source[:12]} "
                f"to {res.output_dir}")
        typer.echo(line + ("" if res.event else " (not recorded)"))
