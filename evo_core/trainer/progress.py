"""A rich progress display for runs (in a terminal): SFT loss, then live reward, strict
accuracy and throughput; held-out evaluations and backtest branches get their own tasks
while they run, so a long pause in the step bar says what it is waiting for."""

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
        self._evals: dict[str, Any] = {}
        self._backtest: Any = None
        self._eval = ""

    def sft(self, step: int, total: int, loss: float) -> None:
        if self._sft is None:
            self.progress.start()
            self._sft = self.progress.add_task("SFT warm start", total=total, info="")
        self.progress.update(self._sft, completed=step, info=f"loss {loss:.3f}")

    def start_run(self, run_id: str, mode: str, total: int, done: int) -> None:
        self.progress.start()
        self._task = self.progress.add_task(f"{mode} {run_id}", total=total, completed=done, info="")

    def evaluating(self, step: int, split: str) -> None:
        """A held-out evaluation starts (an indeterminate task until ``evaluated``)."""
        self.progress.start()
        self._evals[split] = self.progress.add_task(f"  eval {split} @ step {step}", total=None, info="")

    def evaluated(self, step: int, split: str, metrics: Mapping[str, Any]) -> None:
        task = self._evals.pop(split, None)
        if task is not None:
            self.progress.remove_task(task)

    def backtest(self, kind: str, done: int, total: int) -> None:
        """A backtest branch trains (``kind="train"``, step ``done`` of ``total``) or evaluates."""
        if self._backtest is None:
            self._backtest = self.progress.add_task("  backtest branch", total=total, info="")
        info = "evaluating" if kind == "eval" else "training"
        self.progress.update(self._backtest, total=total, completed=done, info=info)

    def step(self, step: int, m: Mapping[str, Any], evals: Optional[Mapping[str, Any]]) -> None:
        if self._backtest is not None:  # the step's harness pass is over
            self.progress.remove_task(self._backtest)
            self._backtest = None
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
