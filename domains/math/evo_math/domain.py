"""The math ``Domain``: tasks, the single-turn episode, the training verifier and the oracle."""

from __future__ import annotations

import collections
import hashlib
import threading
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import Completion, Task, TaskSource, Verdict
from evo_math._version import __version__
from evo_math.grading import Graded, check_mode, grade_many, to_verdict
from evo_math.loading import DEFAULT_TEMPLATE, TaskFormatError, check_template, load_tasks, render_prompt
from evo_math.pool import VerifierPool, shared_pool

GRADER_KEYS = ("verifier", "timeout_s", "workers", "memory_mb", "prompt_template")
# Loading options given in the run config apply to every file the domain loads.
LOAD_KEYS = ("problem_field", "answer_field", "id_field", "id_prefix", "validation_fraction", "split_seed")
CONFIG_KEYS = GRADER_KEYS + LOAD_KEYS


class MathDomain:
    """Math with boxed final answers, graded by math-verify in a worker pool.

    ``verifier`` is the training verifier's mode (``lenient``: the common, hackable
    "any candidate matches"; ``strict``: one distinct final boxed answer). The oracle is
    always strict. A task loaded with ``options={"verifier": ...}`` overrides the mode.
    ``timeout_s`` is the hard wall-clock bound on one verification.
    """

    name = "math"
    version = __version__

    def __init__(
        self,
        verifier: str = "lenient",
        *,
        timeout_s: float = 5.0,
        workers: Optional[int] = None,
        memory_mb: int = 2048,
        prompt_template: str = DEFAULT_TEMPLATE,
        pool: Optional[VerifierPool] = None,
        cache_size: int = 4096,
        load_options: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.verifier = check_mode(verifier)
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self.workers = workers
        self.memory_mb = memory_mb
        self.prompt_template = check_template(prompt_template)
        self._pool = pool
        self.load_options = dict(load_options or {})
        unknown = set(self.load_options) - set(LOAD_KEYS)
        if unknown:
            raise ValueError(f"math: unknown loading option(s) {sorted(unknown)} (known: {', '.join(LOAD_KEYS)})")
        # verify() and oracle() on the same rollout share one pool job: a job answers both modes.
        self._cache: collections.OrderedDict[tuple[str, str], Graded] = collections.OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()

    def configure(self, options: Mapping[str, Any]) -> "MathDomain":
        """A copy with the run config's ``[task] options`` applied."""
        unknown = set(options) - set(CONFIG_KEYS)
        if unknown:
            raise ValueError(f"math: unknown option(s) {sorted(unknown)} (known: {', '.join(CONFIG_KEYS)})")
        return MathDomain(
            options.get("verifier", self.verifier),
            timeout_s=float(options.get("timeout_s", self.timeout_s)),
            workers=options.get("workers", self.workers),
            memory_mb=int(options.get("memory_mb", self.memory_mb)),
            prompt_template=options.get("prompt_template", self.prompt_template),
            load_options={**self.load_options, **{k: v for k, v in options.items() if k in LOAD_KEYS}},
        )

    @property
    def pool(self) -> VerifierPool:
        if self._pool is None or self._pool._closed:
            self._pool = shared_pool(self.workers, self.timeout_s, self.memory_mb)
        return self._pool

    # -- tasks and the episode -------------------------------------------------------------
    def load_tasks(self, source: TaskSource) -> list[Task]:
        if self.load_options:  # the file's own options win over the run config's
            source = attrs.evolve(source, options={**self.load_options, **source.options})
        return load_tasks(source, domain=self.name, template=self.prompt_template)

    def build_prompt(self, problem: str) -> str:
        """The single-turn episode: the problem plus the instruction to box the answer."""
        return render_prompt(self.prompt_template, problem)

    # -- grading ---------------------------------------------------------------------------
    def _mode(self, task: Task) -> str:
        return check_mode(task.meta.get("verify_mode", self.verifier)) if task.meta else self.verifier

    def _graded(self, pairs: Sequence[tuple[Task, Completion]], progress: bool = False) -> list[Graded]:
        # Keyed by a digest: responses can be long, and the cache should not hold them.
        keys = [(str(t.gold), hashlib.blake2b(c.text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest())
                for t, c in pairs]
        out: list[Optional[Graded]] = []
        with self._cache_lock:
            for k in keys:
                g = self._cache.get(k)
                if g is not None:
                    self._cache.move_to_end(k)
                out.append(g)
        todo = [i for i, g in enumerate(out) if g is None]
        if todo:
            fresh = grade_many([(pairs[i][0].gold, pairs[i][1].text) for i in todo], self.pool, progress=progress)
            with self._cache_lock:
                for i, g in zip(todo, fresh):
                    out[i] = g
                    if g.infra_error is None:  # an infrastructure error may pass on retry
                        self._cache[keys[i]] = g
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return [g for g in out if g is not None]

    def _verdicts(self, pairs: Sequence[tuple[Task, Completion]], modes: Sequence[str], progress: bool = False) -> list[Verdict]:
        graded = self._graded(pairs, progress)
        return [
            to_verdict(g, m, response=c.text, truncated=c.truncated, n_tokens=c.n_tokens)
            for g, m, (_, c) in zip(graded, modes, pairs)
        ]

    def verify(self, task: Task, completion: Completion) -> Verdict:
        """The training verifier (mode from the task or the domain; default lenient)."""
        return self._verdicts([(task, completion)], [self._mode(task)])[0]

    def oracle(self, task: Task, completion: Completion) -> Verdict:
        """The strict oracle: last box, exactly one distinct final answer, equal to gold."""
        return self._verdicts([(task, completion)], ["strict"])[0]

    def verify_batch(self, pairs: Sequence[tuple[Task, Completion]], *, progress: bool = False) -> list[Verdict]:
        """``verify`` for many rollouts in one trip through the pool (much faster)."""
        return self._verdicts(pairs, [self._mode(t) for t, _ in pairs], progress)

    def oracle_batch(self, pairs: Sequence[tuple[Task, Completion]], *, progress: bool = False) -> list[Verdict]:
        return self._verdicts(pairs, ["strict"] * len(pairs), progress)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


__all__ = ["MathDomain", "TaskFormatError"]
