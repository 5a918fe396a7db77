"""A rich progress display for runs: SFT loss, then live reward, strict accuracy and throughput."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class RunProgress:
    def __init__(self, console: Optional[Console] = None) -> None:
        self.console = console or Console(stderr=True)
        self._new()

    def _new(self) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=self.console, transient=False,
        )
        self._task: Any = None
        self._sft: Any = None
        self._eval = ""

    def sft(self, step: int, total: int, loss: float) -> None:
        if self._sft is None:
            self.progress.start()
            self._sft = self.progress.add_task("SFT warm start", total=total, info="")
        self.progress.update(self._sft, completed=step, info=f"loss {loss:.3f}")

    def start_run(self, run_id: str, mode: str, total: int, done: int) -> None:
        self.progress.start()
        self._task = self.progress.add_task(f"{mode} {run_id}", total=total, completed=done, info="")

    def step(self, step: int, m: Mapping[str, Any], evals: Optional[Mapping[str, Any]]) -> None:
        if evals:
            acc = evals.get("strict_accuracy")
            self._eval = f" heldout strict {acc:.2f}" if acc is not None else ""

        def f(key: str, fmt: str = "{:.2f}") -> str:
            v = m.get(key)
            return fmt.format(v) if v is not None else "-"

        info = (f"reward {f('reward_mean')} strict {f('strict_correct_rate')} len {f('length_mean', '{:.1f}')}"
                f"{self._eval} | {f('rollout_tokens_per_s', '{:.0f}')} tok/s gen")
        self.progress.update(self._task, completed=step, info=info)

    def end_run(self) -> None:
        self.progress.stop()
        self._sft = None
        self._new()  # the next run gets its own bars
