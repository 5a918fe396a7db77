"""The harness, measured like a skeptical reviewer would: a flaw suite × harness arms × seeds.

    python -m benchmarks.evolution --suite --seeds 5 --json          # the headline matrix (cold)
    python -m benchmarks.evolution --suite --seeds 3 --mode both      # cold and warm (skills from other flaws)
    python -m benchmarks.evolution --suite --seeds 3 --ablations      # + evolving/gate-only, no-policy-gate, no-revision
    python -m benchmarks.evolution --suite --audit-sweep arithmetic/hedge   # audit rate 1.0, 0.1, 0.05, 0.02
    python -m benchmarks.evolution --smoke                            # 1 seed, 40 steps, every flaw and arm (CI)
    python -m benchmarks.evolution --suite --budget-matched           # + early stopping on the evolving arm's labels

Every cell (flaw, arm, seed) is one ``evo run`` in its own SQLite store under ``--dir``; a cell
whose store holds a completed run is read, not re-run, and an interrupted one is resumed, so a
killed suite continues where it stopped. Cells run ``--jobs`` at a time (one torch thread each),
each as soon as its warm start exists, longest first.
Every figure is read back from the logs (``evo_core.harness.summary``): test-split figures that
nothing in the harness read. ``fixed+early-stop`` is the fixed run's own trajectory with the
checkpoint of best validation accuracy kept (its training is identical: nothing acts on it).
``fixed+early-stop@budget`` (``--budget-matched``) is the same early stop given the evolving
arm's decision-relevant oracle labels: a fixed run (the same training) whose validation
schedule (every how many steps, samples per item) gives the labels closest to those the
evolving cell of its flaw and seed used (read from that cell's log), so evolving − early stop
is also reported at equal labels. Every cell's strict-oracle labels are reported per purpose
(``evo_core.trainer.oracle.label_summary``), with the decision-relevant share of training rollouts.

Reported per flaw and arm, as a mean and a 95% t-interval across seeds: test accuracy of the
main line and of the last checkpoint, hack rate, wrong-branch promotions (test-based, paired
CI), the step of the first valid diagnosis and of the first promoted repair, how many steps
before the fixed run's collapse the diagnosis came, and wall time. Then the comparison the claim
rests on: evolving − fixed+early-stop and evolving − reference, paired by seed, with CIs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SUITE = ROOT / "configs" / "suite" / "suite.toml"
MATCHED = "fixed+early-stop@budget"  # early stopping given the evolving arm's decision-relevant labels
MAX_SAMPLES_FACTOR = 8  # the matched early stop validates with at most this many times the samples per item
AUDIT_SWEEP = (1.0, 0.1, 0.05, 0.02)
# issue 33's goal: evolving within 0.03 of the reference, its hack rate within 0.02, above early
# stopping (paired CI), and its LAST checkpoint within 0.10 of the reference (blocked is not repaired)
GOAL = {"test_within": 0.03, "hack_within": 0.02, "last_within": 0.10}


# --- the matrix ----------------------------------------------------------------------------


def load_suite(path: Path = SUITE) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def cell_name(flaw: str, arm: str, seed: int, variant: str = "") -> str:
    return f"{flaw.replace('/', '_')}__{arm.replace('/', '-').replace('+', '-')}{variant}__seed{seed}"


def default_flaws(suite: dict[str, Any]) -> list[str]:
    """Every flaw of the suite but its probes (``probe = true``): a probe was added after the
    harness was built and runs only when named, so the default matrix is what it always was."""
    return [f for f, spec in suite["flaws"].items() if not spec.get("probe")]


def with_task_seed(url: str, task_seed: int) -> str:
    """The same generated task set drawn with another seed: new train, validation and test items."""
    if not url.startswith("generate://"):
        raise SystemExit(f"--task-seed needs generated tasks (generate://...), not {url!r}")
    base, _, query = url.partition("?")
    parts = [p for p in query.split("&") if p and not p.startswith("seed=")]
    return f"{base}?{'&'.join(parts + [f'seed={task_seed}'])}"


def task_url(config: str, sets: list[str]) -> str:
    """The task URL a cell trains on: the last ``task.train=`` override, else the config's."""
    for s in reversed(sets):
        key, _, value = s.partition("=")
        if key.strip() == "task.train":
            return value.strip().strip('"')
    with open(config, "rb") as fh:
        return tomllib.load(fh)["task"]["train"]


def cells(suite: dict[str, Any], flaws: list[str], arms: list[str], seeds: list[int], *, mode: str,
          audit_sweep: Optional[str], smoke: bool, per_seed_warm_starts: bool = False,
          task_seed: Optional[int] = None) -> list[dict[str, Any]]:
    out = []
    modes = ["cold", "warm"] if mode == "both" else [mode]
    for flaw in flaws:
        for seed in seeds:
            for arm in arms:
                for m in modes:
                    if m == "warm" and not arm.startswith("evolving"):
                        continue
                    out.append({"flaw": flaw, "arm": arm, "seed": seed, "mode": m, "variant": "-warm" if m == "warm" else "",
                                "audit": None})
    if audit_sweep:
        for seed in seeds:
            for rate in AUDIT_SWEEP:
                out.append({"flaw": audit_sweep, "arm": "evolving", "seed": seed, "mode": "cold",
                            "variant": f"-audit{rate}", "audit": rate})
    for c in out:
        c["name"] = cell_name(c["flaw"], c["arm"], c["seed"], c["variant"])
        c["harness"] = "fixed" if c["arm"] == MATCHED else c["arm"]  # the arm `evo run` runs
        f = suite["flaws"][c["flaw"]]
        c["config"] = str(ROOT / f["config"])
        c["sets"] = list(suite["defaults"]["set"]) + list(f.get("set", [])) + [
            f"run.seed={c['seed']}", f"task.options.signal_seed={c['seed']}", "run.threads=1", "run.progress=false"]
        if smoke:
            c["sets"] += list(suite["defaults"].get("smoke", [])) + list(f.get("smoke", []))
        if c["audit"] is not None:
            c["sets"].append(f"harness.audit.rate={c['audit']}")
        if per_seed_warm_starts:  # each seed SFT-trains its own warm start (the 5-seed headline's protocol)
            c["sets"].append(f"sft.seed={c['seed']}")
        if task_seed is not None:  # a fresh draw of every split; the warm starts retrain (their key hashes the targets)
            c["sets"].append(f'task.train="{with_task_seed(task_url(c["config"], c["sets"]), task_seed)}"')
            c["name"] += f"__task{task_seed}"
        c["warm_seed"] = warm_seed(c["sets"], c["seed"])
    for c in out:  # the matched early stop validates on the labels of the evolving cell of its flaw, seed and variant
        if c["arm"] == MATCHED:
            twin = [x for x in out if x["arm"] == "evolving" and (x["flaw"], x["seed"], x["mode"], x["variant"])
                    == (c["flaw"], c["seed"], c["mode"], c["variant"])]
            if not twin:
                raise SystemExit(f"arm {MATCHED} is matched to the evolving arm's labels: add evolving to --arms")
            c["match"] = twin[0]["name"]
            # its labels are set by the match, not capped (a cap would cut its last evaluations)
            c["sets"] = [x for x in c["sets"] if not x.startswith("harness.oracle.budget=")]
    return out


def warm_seed(sets: list[str], seed: int) -> int:
    """The seed of a cell's SFT warm start: the last ``sft.seed=`` override, else the run seed."""
    for s in reversed(sets):
        key, _, value = s.partition("=")
        if key.strip() == "sft.seed":
            return int(value)
    return seed


# --- running a cell ------------------------------------------------------------------------


def store_url(d: Path, cell: dict[str, Any]) -> str:
    return f"sqlite:///{(d / (cell['name'] + '.sqlite')).resolve()}"


def cell_state(url: str) -> tuple[Optional[str], Optional[str]]:
    """(run id, status) of the cell's run, or (None, None)."""
    from evo_core.store import open_store, run_stream
    from evo_events import RunFinished

    if not Path(url[len("sqlite:///"):]).exists():
        return None, None
    st = open_store(url)
    try:
        runs = st.runs()
        if not runs:
            return None, None
        rid = runs[0]
        fin = list(st.events(run_stream(rid), types=[RunFinished.TYPE]))
        return rid, (fin[-1].status if fin else "running")
    finally:
        st.close()


def warm_sources(d: Path, cell: dict[str, Any], all_cells: list[dict[str, Any]]) -> list[str]:
    """Warm mode: skills exported by the cold evolving runs of the *other* flaws, same seed."""
    return [store_url(d, c) for c in all_cells if c["arm"] == "evolving" and c["mode"] == "cold" and not c["variant"]
            and c["seed"] == cell["seed"] and c["flaw"] != cell["flaw"]]


def run_cell(d: Path, cell: dict[str, Any], all_cells: list[dict[str, Any]], timeout: float) -> dict[str, Any]:
    url = store_url(d, cell)
    rid, status = cell_state(url)
    if status == "completed":
        return {"name": cell["name"], "ran": False, "status": status}
    sets = list(cell["sets"])
    if cell["mode"] == "warm":
        sets.append("harness.skills_from=" + json.dumps(warm_sources(d, cell, all_cells)))
    if cell.get("match"):
        twin = next(c for c in all_cells if c["name"] == cell["match"])
        sets += matched_sets(read_cell(d, twin), cell)
    cmd = [sys.executable, "-m", "evo_core.cli.app", "run", cell["config"], "--store", url, "--no-progress",
           "--harness", cell.get("harness", cell["arm"])]
    for s in sets:
        cmd += ["--set", s]
    if rid:
        cmd += ["--resume", rid]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EVO_NO_PLUGIN_COMMANDS": "1", "EVO_LOG_LEVEL": "WARNING"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.perf_counter() - t0
    out = {"name": cell["name"], "ran": True, "wall_s": wall, "returncode": proc.returncode}
    if proc.returncode != 0:
        out["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return out


def eval_count(steps: int, every: int) -> int:
    """Validation evaluations of a run: at the start, every ``every`` steps and at the last step."""
    return 1 + steps // every + (1 if steps % every else 0)


def match_schedule(target: float, *, steps: int, every: int, per_eval_sample: float, greedy: int, samples: int,
                   max_factor: int = MAX_SAMPLES_FACTOR) -> dict[str, Any]:
    """The validation schedule (every how many steps, how many samples per item) whose labels
    come closest to ``target``: validation every 1 to ``steps`` steps, with 1 to ``max_factor``
    times the run's samples per item. ``per_eval_sample`` is the labels one evaluation draws
    per sample per item (the validation items); ``greedy`` is 1 when a greedy completion is
    scored too. Within 2% of the target, the run's own samples per item win, then the closest
    labels, then more frequent validation."""
    best: Optional[dict[str, Any]] = None
    for n in range(1, max(1, samples) * max_factor + 1):
        for e in range(1, max(1, steps) + 1):
            labels = eval_count(steps, e) * per_eval_sample * (n + greedy)
            # within 2% of the target, what differs least from the run's own protocol wins
            key = (int(abs(labels - target) / max(target, 1.0) / 0.02), abs(n - samples), abs(labels - target), e)
            if best is None or key < best["key"]:
                best = {"key": key, "eval_every": e, "samples": n, "labels": labels}
    assert best is not None
    best.pop("key")
    return {**best, "target": target}


def matched_sets(twin: Optional[dict[str, Any]], cell: dict[str, Any]) -> list[str]:
    """``--set`` options that give the fixed run's early stop the decision-relevant labels of
    the evolving run ``twin`` (read from its log): its validation runs more often and, if that
    is not enough, with more samples per item; the test split is evaluated with every
    validation (report only), so that the best validation checkpoint has a test score. A
    target below the run's own schedule validates less often, or with fewer samples."""
    if twin is None or twin.get("status") != "completed" or not twin.get("oracle_labels"):
        raise RuntimeError(f"{cell['name']}: its evolving twin {cell['match']} has no completed run with counted labels")
    lab, sched = twin["oracle_labels"], twin["eval_schedule"]
    greedy, samples = int(bool(sched["greedy"])), int(sched["samples"])
    # the validation items: the main line's validation labels over its evaluations and their samples
    per_eval_sample = lab["early_stop_validation"] / max(1, sched["validation_evals"]) / max(1, samples + greedy)
    m = match_schedule(lab["decision_relevant"], steps=int(sched["steps"]), every=int(sched["eval_every"]),
                       per_eval_sample=per_eval_sample, greedy=greedy, samples=samples)
    return [f"run.eval_every={m['eval_every']}", f"eval.samples={m['samples']}", "eval.test_every=0"]


def cell_order(todo: list[dict[str, Any]], heavy: Optional[dict[str, int]] = None) -> list[tuple[dict[str, Any], list[str]]]:
    """Each cell with the names of the cells it must wait for. The first cell of each warm start
    (flaw and SFT seed: one per flaw where the seeds share it) trains and caches it for the others; a warm cell reads the skills of the cold
    evolving runs of the other flaws, same seed. Longest first, so that no core waits at the
    end on one long cell: flaws by ``heavy`` (a size per flaw: the SFT steps of its warm
    start), and evolving cells (they train backtest branches too) before the others."""
    heavy = heavy or {}

    def key(c: dict[str, Any]) -> tuple:
        return (-heavy.get(c["flaw"], 0), not c["arm"].startswith("evolving"), c["seed"])

    def start(c: dict[str, Any]) -> tuple[str, int]:
        return c["flaw"], c.get("warm_seed", c["seed"])

    first: dict[tuple[str, int], dict[str, Any]] = {}
    for c in sorted(todo, key=lambda c: (c["mode"] != "cold", key(c))):  # a warm cell waits for skills: never a head
        first.setdefault(start(c), c)
    heads = sorted(first.values(), key=key)
    out = [(c, []) for c in heads]
    for c in sorted((c for c in todo if c not in heads), key=key):
        deps = [first[start(c)]["name"]] + ([c["match"]] if c.get("match") else [])
        if c["mode"] == "warm":
            deps += [x["name"] for x in todo if x["mode"] == "cold" and x["arm"] == "evolving" and not x["variant"]
                     and x["seed"] == c["seed"] and x["flaw"] != c["flaw"]]
        out.append((c, deps))
    return out


def run_matrix(d: Path, todo: list[dict[str, Any]], all_cells: list[dict[str, Any]], jobs: int, timeout: float,
               log: Any, heavy: Optional[dict[str, int]] = None) -> list[dict[str, Any]]:
    """Runs ``jobs`` cells at a time, each as soon as the cells it depends on are done (no phase
    barrier: a core that finishes early takes the next ready cell)."""
    from concurrent.futures import FIRST_COMPLETED, wait

    pending = cell_order(todo, heavy)
    done: set[str] = set()
    results: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        running: dict[Any, str] = {}
        while pending or running:
            while len(running) < max(1, jobs):
                ready = next((i for i, (_, deps) in enumerate(pending) if all(x in done for x in deps)), None)
                if ready is None:
                    break
                c, _ = pending.pop(ready)
                running[ex.submit(run_cell, d, c, all_cells, timeout)] = c["name"]
            if not running:  # nothing can start: a dependency is not in this matrix
                raise RuntimeError(f"cells wait on cells that never run: {[c['name'] for c, _ in pending]}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                running.pop(fut)
                res = fut.result()
                done.add(res["name"])  # a failed cell still releases its dependants: they train the warm start themselves
                results.append(res)
                log(f"{res['name']}: {'ran' if res['ran'] else 'read'}"
                    + (f" in {res['wall_s']:.0f}s" if res.get("wall_s") else "")
                    + (f" FAILED {res.get('error')}" if res.get("returncode") else ""))
    return results


# --- reading and aggregating ---------------------------------------------------------------


def read_cell(d: Path, cell: dict[str, Any]) -> Optional[dict[str, Any]]:
    from evo_core.harness.summary import summarize_run
    from evo_core.store import open_store, run_stream

    url = store_url(d, cell)
    rid, status = cell_state(url)
    if rid is None:
        return None
    st = open_store(url)
    try:
        recs = list(st.read_stream(run_stream(rid)))
        s = summarize_run(r.decode() for r in recs)
    finally:
        st.close()
    s.update(cell=cell["name"], flaw=cell["flaw"], arm=cell["arm"] + cell["variant"], seed=cell["seed"], mode=cell["mode"],
             wall_s=(recs[-1].recorded_at - recs[0].recorded_at) if recs and recs[0].recorded_at else None)
    if cell["arm"] == MATCHED:  # the fixed run's best validation checkpoint, its labels those the choice read
        s.update(test_main=s["test_early_stop"], hack_main=s["hack_early_stop"], wrong_branch_promotions=None,
                 **early_stop_labels(s))
        s["matched_to"] = cell.get("match")
    return s


def included_rows(paths: list[str], have: set[str], flaws: list[str], seeds: list[int], *, mode: str) -> list[dict[str, Any]]:
    """Run rows of earlier reports (their ``runs``), for the selected flaws and seeds, that no store
    here holds: a report keeps what was read from the logs of cells whose stores are gone."""
    out: list[dict[str, Any]] = []
    modes = ("cold", "warm") if mode == "both" else (mode,)
    for path in paths:
        for r in json.loads(Path(path).read_text())["runs"]:
            if (r["cell"] not in have and r["flaw"] in flaws and r["seed"] in seeds and r.get("mode", "cold") in modes
                    and not r.get("derived_from")):
                out.append({**r, "source": r.get("source") or str(path)})
                have.add(r["cell"])
    return out


def t_ci(xs: list[Optional[float]]) -> dict[str, Any]:
    from evo_core.harness.stats import t_interval

    xs = [float(x) for x in xs if x is not None]
    if not xs:
        return {"mean": None, "ci": None, "n": 0, "values": []}
    ti = t_interval(xs, 0.95)
    return {"mean": statistics.fmean(xs), "ci": [ti.lo, ti.hi] if ti else None, "n": len(xs), "values": xs}


FIGURES = ("test_main", "test_last", "hack_main", "hack_last", "wrong_branch_promotions", "first_valid_diagnosis_step",
           "first_repair_step", "collapse_step", "wall_s", "diagnoses", "intervention_promotions", "labels_decision",
           "labels_decision_share")
LABEL_PURPOSES = ("audit", "regrade", "validation", "train", "test")


def label_figures(rs: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """An arm's oracle labels, mean over its seeds: per purpose (main line and A/B branches),
    the A/B branches' own, the decision-relevant total and its share of training rollouts.
    ``test`` is report only; ``train`` is the reference's reward. None when no run counted them."""
    labelled = [r["oracle_labels"] for r in rs if r.get("oracle_labels")]
    if not labelled:
        return None

    def mean(xs: list[float]) -> float:
        return statistics.fmean(xs) if xs else 0.0

    return {"runs": len(labelled), "by_purpose": {p: mean([x["by_purpose"].get(p, 0) for x in labelled]) for p in LABEL_PURPOSES},
            "backtest_branches": mean([x["backtest_branches"] for x in labelled]),
            "decision_relevant": mean([x["decision_relevant"] for x in labelled]),
            "decision_purposes": labelled[0]["decision_purposes"],
            "training_rollouts": mean([x["training_rollouts"] for x in labelled]),
            "decision_share": mean([x["decision_share"] for x in labelled if x.get("decision_share") is not None]),
            "budget_share": labelled[0].get("budget_share")}


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    rows = rows + early_stop_rows(rows)
    out: dict[str, Any] = {}
    for flaw in sorted({r["flaw"] for r in rows}):
        out[flaw] = {}
        for arm in sorted({r["arm"] for r in rows if r["flaw"] == flaw}):
            rs = sorted((r for r in rows if r["flaw"] == flaw and r["arm"] == arm), key=lambda r: r["seed"])
            out[flaw][arm] = {"seeds": [r["seed"] for r in rs], **{k: t_ci([r.get(k) for r in rs]) for k in FIGURES},
                              "oracle_labels": label_figures(rs)}
        fixed = {r["seed"]: r for r in rows if r["flaw"] == flaw and r["arm"] == "fixed"}
        evo = {r["seed"]: r for r in rows if r["flaw"] == flaw and r["arm"] == "evolving"}
        leads = [fixed[s]["collapse_step"] - evo[s]["first_valid_diagnosis_step"] for s in evo
                 if s in fixed and fixed[s].get("collapse_step") is not None
                 and evo[s].get("first_valid_diagnosis_step") is not None]
        if "evolving" in out[flaw]:
            out[flaw]["evolving"]["diagnosis_lead_over_fixed_collapse"] = t_ci(leads)
    return out


def sft_runs(d: Path) -> dict[str, dict[str, float]]:
    """Each cached SFT warm start under ``d`` (one per flaw and seed; the cells' logs start after
    it, so their wall times leave it out), by cache key: its steps and the seconds it took."""
    out: dict[str, dict[str, float]] = {}
    for m in sorted((d / ".evo" / "cache" / "sft").glob("*/metrics.json")):
        try:
            got = json.loads(m.read_text())
        except (OSError, ValueError):
            continue
        t, n = got.get("sft_time_s"), got.get("sft_steps")
        if isinstance(t, (int, float)) and isinstance(n, (int, float)):
            out[m.parent.name] = {"steps": int(n), "s": float(t)}
    return out


def included_sft_runs(paths: list[str], sft_steps: dict[str, int]) -> dict[str, dict[str, float]]:
    """The SFT warm starts earlier reports measured, so that a report built from a fresh cells
    directory still counts them. Reports older than ``cost.sft_runs`` kept only a median per
    flaw; each such median stands in as one run of that flaw's length."""
    out: dict[str, dict[str, float]] = {}
    for path in paths:
        c = json.loads(Path(path).read_text()).get("cost") or {}
        if c.get("sft_runs"):
            out.update({k: {"steps": int(v["steps"]), "s": float(v["s"])} for k, v in c["sft_runs"].items()})
            continue
        for flaw, s in (c.get("median_sft_s") or {}).items():
            if flaw in sft_steps:
                out[f"{path}:{flaw}"] = {"steps": sft_steps[flaw], "s": float(s)}
    return out


def included_measurements(paths: list[str]) -> list[dict[str, Any]]:
    """The measured matrix wall times that earlier reports carry (each invocation once)."""
    out: list[dict[str, Any]] = []
    for path in paths:
        rep = json.loads(Path(path).read_text())
        m = (rep.get("cost") or {}).get("measured")
        if m is None and "--read-only" not in rep.get("command", "") and rep.get("total_wall_s"):
            # a report from before cost.measured: its total wall time, without a count of the cells it ran
            m = {"cells_ran": None, "cells": rep["cells"], "seeds": len(rep["seeds"]), "flaws": len(rep["flaws"]),
                 "jobs": (rep.get("cost") or {}).get("jobs"), "wall_s": round(float(rep["total_wall_s"]), 1)}
        for entry in ([m] if isinstance(m, dict) else m or []):
            entry = {**entry, "source": entry.get("source") or str(path)}
            if entry not in out:
                out.append(entry)
    return out


def machine() -> dict[str, Any]:
    """The CPU a measurement ran on: wall times compare only on the same CPU type (2-core
    machines of different types have differed by more than the budget's margin)."""
    info: dict[str, Any] = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        return info
    fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in first.splitlines())}
    if fields.get("model name"):
        info["cpu"] = fields["model name"]
    if fields.get("model"):
        info["cpu_model"] = f"family {fields.get('cpu family', '?')} model {fields['model']}"
    return info


def flaw_sft_steps(suite: dict[str, Any], flaws: list[str]) -> dict[str, int]:
    """How many SFT steps each flaw's warm start takes (its config with the suite's overrides)."""
    from evo_core.config import load_config

    out = {}
    for flaw in flaws:
        f = suite["flaws"][flaw]
        try:
            cfg = load_config(str(ROOT / f["config"]), list(suite["defaults"]["set"]) + list(f.get("set", [])), check=False)
        except Exception:  # a flaw whose domain is not installed: no SFT estimate for it
            continue
        out[flaw] = int(cfg.sft.steps) if cfg.sft.enabled else 0
    return out


def cost(rows: list[dict[str, Any]], sft: dict[str, dict[str, float]], sft_steps: dict[str, int], *, jobs: int = 2,
         seeds: tuple[int, ...] = (3, 5), sft_fallback: Optional[dict[str, dict[str, float]]] = None,
         shared_warm_starts: bool = False) -> dict[str, Any]:
    """What the headline matrix costs on this machine, projected from the cells that ran: the
    median wall time of each (flaw, arm) cell (medians: a cell that shared the CPU with other
    work is an outlier, not the cost) plus one SFT warm start per flaw and seed, or per flaw
    where the seeds share it (the median of the cached ones of the same length), spread over
    ``jobs`` cells at a time. An estimate: it assumes the jobs stay busy.

    Timings of cells timed here (rows without a ``source``) and warm starts cached here win over
    those of included reports, flaw by flaw: older reports may have been timed on a busier machine,
    and a median over both would hide which one the projection stands on."""
    cells = [r for r in rows if r.get("mode", "cold") == "cold" and r.get("wall_s")
             and r["arm"] in ("fixed", "reference", "evolving")]
    timed_here = {(r["flaw"], r["arm"]) for r in cells if not r.get("source")}
    cells = [r for r in cells if not r.get("source") or (r["flaw"], r["arm"]) not in timed_here]
    per: dict[str, dict[str, float]] = {}
    for flaw in sorted({r["flaw"] for r in cells}):
        per[flaw] = {arm: statistics.median(r["wall_s"] for r in cells if r["flaw"] == flaw and r["arm"] == arm)
                     for arm in sorted({r["arm"] for r in cells if r["flaw"] == flaw})}

    def by_steps(runs: dict[str, dict[str, float]]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for run in runs.values():
            out.setdefault(int(run["steps"]), []).append(float(run["s"]))
        return out

    here, old = by_steps(sft), by_steps(sft_fallback or {})
    pick = {n: here.get(n) or old.get(n) for n in set(here) | set(old)}
    used = {n for flaw, n in sft_steps.items() if flaw in per and pick.get(n)}
    median_sft = {flaw: statistics.median(pick[n]) for flaw, n in sft_steps.items() if n in used and flaw in per}
    cells_one_seed, sft_one = sum(sum(v.values()) for v in per.values()), sum(median_sft.values())
    # the warm starts the medians stand on, here or in included reports
    return {"median_cell_wall_s": per, "median_sft_s": median_sft, "sft_runs_measured": sum(len(pick[n]) for n in used),
            "sft_runs": {**(sft_fallback or {}), **sft}, "timed_here": sorted(f"{f} {a}" for f, a in timed_here),
            "jobs": jobs, "shared_warm_starts": shared_warm_starts,
            "projected_wall_h": {f"seeds_{n}": round((cells_one_seed * n + sft_one * (1 if shared_warm_starts else n))
                                                     / max(1, jobs) / 3600, 2) for n in seeds},
            "budget_h": {"seeds_3": 2.0}}


def provenance(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per flaw, how many cells each code version ran: figures are comparable only within one.
    Rows of reports older than the run's ``code_version`` are named by the report they came from."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["arm"] == "fixed+early-stop":
            continue  # derived from the fixed cell, not a run of its own
        key = r.get("code_version") or f"unrecorded (from {r.get('source') or 'this directory'})"
        per = out.setdefault(r["flaw"], {})
        per[key] = per.get(key, 0) + 1
    return out


def early_stop_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """fixed+early-stop: the fixed run's trajectory, the best-validation checkpoint kept."""
    out = []
    for r in rows:
        if r["arm"] == "fixed" and not any(x["arm"] == "fixed+early-stop" and x["flaw"] == r["flaw"]
                                           and x["seed"] == r["seed"] for x in rows):
            out.append({**r, "arm": "fixed+early-stop", "test_main": r["test_early_stop"], "hack_main": r["hack_early_stop"],
                        "wrong_branch_promotions": None, "derived_from": r["cell"], **early_stop_labels(r)})
    return out


def early_stop_labels(r: dict[str, Any]) -> dict[str, Any]:
    """Early stopping over a fixed run decides on the main line's validation labels alone:
    those are its decision-relevant labels (the run's audit labels are drawn, but nothing reads them)."""
    lab = r.get("oracle_labels")
    if not lab:
        return {"oracle_labels": None, "labels_decision": None, "labels_decision_share": None}
    lab = {**lab, "decision_relevant": lab["early_stop_validation"], "decision_share": lab["early_stop_share"],
           "decision_purposes": ["validation (main line)"]}
    return {"oracle_labels": lab, "labels_decision": lab["decision_relevant"], "labels_decision_share": lab["decision_share"]}


def same_start(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two runs started from the same warm start: by the weights' digest where both rows
    carry it, else by their step-0 test accuracy (seeded by the weights, so one start always
    scores the same; rows of older reports have only that). A warm start retrained on another
    CPU type differs, so cells of one seed run on different machines are not a pair."""
    if a.get("start_digest") and b.get("start_digest"):
        return a["start_digest"] == b["start_digest"]
    if a.get("test_initial") is None or b.get("test_initial") is None:
        return True  # nothing to tell them apart by
    return a["test_initial"] == b["test_initial"]


def comparisons(rows: list[dict[str, Any]], arm: str = "evolving") -> dict[str, Any]:
    """Paired by seed: the arm minus each baseline, test accuracy of the main line and hack rate.
    A seed whose two cells started from different warm starts is not a pair: it is left out and
    named under ``unpaired_seeds``."""
    rows = rows + early_stop_rows(rows)
    out: dict[str, Any] = {}
    for flaw in sorted({r["flaw"] for r in rows}):
        me = {r["seed"]: r for r in rows if r["flaw"] == flaw and r["arm"] == arm}
        if not me:
            continue
        out[flaw] = {}
        for base in ("fixed+early-stop", "reference", "fixed", MATCHED):
            if base == MATCHED and not any(r["flaw"] == flaw and r["arm"] == base for r in rows):
                continue
            other = {r["seed"]: r for r in rows if r["flaw"] == flaw and r["arm"] == base}
            both = sorted(set(me) & set(other))
            seeds = [s for s in both if same_start(me[s], other[s])]
            acc = t_ci([(me[s]["test_main"] or 0) - (other[s]["test_main"] or 0) for s in seeds])
            hack = t_ci([(me[s]["hack_main"] or 0) - (other[s]["hack_main"] or 0) for s in seeds])
            last = t_ci([(me[s]["test_last"] if me[s].get("test_last") is not None else me[s]["test_main"] or 0)
                         - (other[s]["test_main"] or 0) for s in seeds])
            out[flaw][f"{arm} - {base}"] = {"seeds": seeds, "test_main": acc, "hack_main": hack, "last_vs_main": last,
                                            "unpaired_seeds": [s for s in both if s not in seeds],
                                            "excludes_0": bool(acc["ci"] and (acc["ci"][0] > 0 or acc["ci"][1] < 0))}
        ref = out[flaw].get(f"{arm} - reference")
        es = out[flaw].get(f"{arm} - fixed+early-stop")
        out[flaw]["goal"] = {
            "test_at_least_reference_minus_0.03": bool(ref and ref["test_main"]["mean"] is not None
                                                       and ref["test_main"]["mean"] >= -GOAL["test_within"]),
            "hack_at_most_reference_plus_0.02": bool(ref and ref["hack_main"]["mean"] is not None
                                                     and ref["hack_main"]["mean"] <= GOAL["hack_within"]),
            "above_early_stop_ci_excludes_0": bool(es and es["test_main"]["ci"] and es["test_main"]["ci"][0] > 0),
            "last_at_least_reference_minus_0.10": bool(ref and ref["last_vs_main"]["mean"] is not None
                                                       and ref["last_vs_main"]["mean"] >= -GOAL["last_within"]),
        }
    return out


# --- outputs -------------------------------------------------------------------------------


def fmt(s: dict[str, Any], digits: int = 3) -> str:
    if s.get("mean") is None:
        return "–"
    if s.get("ci") and s["n"] > 1:
        half = (s["ci"][1] - s["ci"][0]) / 2
        return f"{s['mean']:.{digits}f} ± {half:.{digits}f}"
    return f"{s['mean']:.{digits}f}"


def _machine_text(m: dict[str, Any]) -> str:
    model = f", {m['cpu_model']}" if m.get("cpu_model") else ""
    return f"{m.get('cpu', '?')} ({m.get('cores', '?')} cores{model})"


def markdown(result: dict[str, Any]) -> str:
    agg, comp = result["aggregate"], result["comparisons"]
    lines = [f"Seeds {result['seeds']} (the `seeds` column gives each flaw's count), mode {result['mode']}, audit rate {result['audit_rate']}; "
             f"mean ± 95% CI half-width across seeds; test split (nothing in the harness read it).", "",
             "| flaw | arm | test acc. (main line) | test acc. (last) | hack rate (main line) | wrong-branch promotions |",
             "|---|---|---|---|---|---|"]
    order = ["fixed", "fixed+early-stop", MATCHED, "reference", "evolving", "evolving-warm"]
    for flaw, arms in agg.items():
        for arm in sorted(arms, key=lambda a: (order.index(a) if a in order else 99, a)):
            s = arms[arm]
            lines.append(f"| {flaw} | {arm} | {fmt(s['test_main'])} | {fmt(s['test_last'])} | {fmt(s['hack_main'])} | "
                         f"{fmt(s['wrong_branch_promotions'], 1)} |")
    lines += ["", *label_table(agg, order)]
    lines += ["", "| flaw | seeds | evolving − fixed+early-stop | evolving − reference | goal met |", "|---|---|---|---|---|"]
    for flaw, c in comp.items():
        es, ref, goal = c.get("evolving - fixed+early-stop"), c.get("evolving - reference"), c["goal"]
        met = "yes" if all(goal.values()) else "no: " + ", ".join(k for k, v in goal.items() if not v)
        n = len((es or ref or {}).get("seeds") or [])
        lines.append(f"| {flaw} | {n} | {fmt(es['test_main']) if es else '–'} | {fmt(ref['test_main']) if ref else '–'} | {met} |")
    matched = [(f, c[f"evolving - {MATCHED}"]) for f, c in comp.items() if f"evolving - {MATCHED}" in c]
    if matched:
        lines += ["", f"At equal oracle labels: {MATCHED} validates as often, and with as many samples per item, as "
                      "comes closest to the evolving run's decision-relevant labels (same flaw and seed; training "
                      "identical to fixed; the labels table gives both).",
                  "", f"| flaw | seeds | evolving − {MATCHED} |", "|---|---|---|"]
        lines += [f"| {f} | {len(m['seeds'])} | {fmt(m['test_main'])} |" for f, m in matched]
    unpaired = {f: sorted({s for k, v in c.items() if k != "goal" for s in v.get("unpaired_seeds", [])})
                for f, c in comp.items()}
    unpaired = {f: s for f, s in unpaired.items() if s}
    if unpaired:
        lines += ["", "Left out of the paired comparisons, because their arms started from different warm "
                      "starts (a warm start retrained on another CPU type differs): "
                  + "; ".join(f"{f} seed(s) {', '.join(map(str, s))}" for f, s in unpaired.items()) + "."]
    mixed = {f: p for f, p in (result.get("provenance") or {}).items() if len(p) > 1}
    if mixed:
        lines += ["", "Not every cell was run by the same code (cells per code version; a figure is only "
                      "comparable with one run by the same code):"]
        lines += [f"- {f}: " + ", ".join(f"{k} ({n})" for k, n in sorted(p.items())) for f, p in mixed.items()]
    c = result.get("cost") or {}
    if c.get("projected_wall_h"):
        proj = ", ".join(f"{k.split('_')[1]} seeds {v} h" for k, v in c["projected_wall_h"].items())
        per = "one per flaw, shared by its seeds" if c.get("shared_warm_starts") else "one per flaw and seed"
        lines += ["", f"Cost on this machine, projected from the cells' median wall times and {c['sft_runs_measured']} "
                      f"SFT warm starts ({per}) at {c['jobs']} cells at a time: {proj} "
                      f"(budget for 3 seeds: {c['budget_h']['seeds_3']:g} h)."]
    for m in c.get("measured") or []:
        ran = "its" if m["cells_ran"] is None else f"{m['cells_ran']} of its"
        lines += [f"Measured: one invocation ran {ran} {m['cells']} cells ({m['seeds']} seed(s)"
                  + (f" of {m['flaws']} flaws" if m.get("flaws") else "") + f", {m['jobs']} at a time, "
                  + (f"its {m['warm_starts']} warm starts" if m.get("warm_starts") else "warm starts")
                  + f" included) in {m['wall_s'] / 3600:.2f} h"
                  + (f" on {_machine_text(m['machine'])}" if m.get("machine") else "")
                  + (" (resumed: the rest were read)" if m["cells_ran"] not in (None, m["cells"]) else "") + "."]
    return "\n".join(lines) + "\n"


def label_table(agg: dict[str, Any], order: list[str]) -> list[str]:
    """Strict-oracle labels per run, mean over seeds, by purpose (main line and A/B branches),
    and the decision-relevant total as a share of training rollouts."""
    rows = []
    for flaw, arms in agg.items():
        for arm in sorted(arms, key=lambda a: (order.index(a) if a in order else 99, a)):
            lab = arms[arm].get("oracle_labels")
            if not lab:
                continue
            p = lab["by_purpose"]
            rows.append(f"| {flaw} | {arm} | {p['audit']:,.0f} | {p['regrade']:,.0f} | {p['validation']:,.0f} | "
                        f"{lab['backtest_branches']:,.0f} | {p['train']:,.0f} | {lab['decision_relevant']:,.0f} "
                        f"({', '.join(lab['decision_purposes']) or 'none'}) | {lab['decision_share']:.2f} | {p['test']:,.0f} |")
    if not rows:
        return []
    budgets = sorted({str(a["oracle_labels"].get("budget_share")) for v in agg.values() for a in v.values()
                      if a.get("oracle_labels")})
    return ["Strict-oracle labels per run (mean over seeds; audit, re-grade and validation count the A/B branches too, "
            "which the branches column also gives alone). Decision-relevant: the labels the arm's decisions read; "
            "share: of the run's training rollouts (prompts per step × group size × steps). Early stopping reads the "
            "fixed run's main-line validation labels. Test labels are report only. Oracle budget "
            f"(harness.oracle.budget, a share of training rollouts; None: no cap): {', '.join(budgets)}.", "",
            "| flaw | arm | audit | regrade | validation | A/B branches | train (reward) | decision-relevant | share | test (report only) |",
            "|---|---|---|---|---|---|---|---|---|---|", *rows]


def figure_svg(result: dict[str, Any]) -> str:
    """Test accuracy of the main line by flaw and arm, with 95% CIs (a self-contained SVG)."""
    agg = result["aggregate"]
    arms = [a for a in ("fixed", "fixed+early-stop", "reference", "evolving", "evolving-warm")
            if any(a in v for v in agg.values())]
    colours = {"fixed": "#c0392b", "fixed+early-stop": "#e67e22", "reference": "#7f8c8d", "evolving": "#2471a3",
               "evolving-warm": "#5dade2"}
    flaws = list(agg)
    # wide enough for the bars, the one-line legend (120 px an arm) and the title
    w, h, left, top, bottom = max(140 * max(1, len(flaws)) + 80, 120 * len(arms) + 70, 520), 320, 50, 30, 60
    bw = 100 / max(1, len(arms))
    y = lambda v: top + (1 - v) * (h - top - bottom)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
             f'<text x="{left}" y="16" font-size="13">Test strict accuracy (main line), mean and 95% CI over seeds '
             f'{result["seeds"]}</text>']
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:.2f}</text>')
    for i, flaw in enumerate(flaws):
        x0 = left + 20 + i * 140
        parts.append(f'<text x="{x0 + 50}" y="{h - bottom + 16}" text-anchor="middle">{flaw.split("/")[-1]}</text>')
        for j, arm in enumerate(arms):
            s = agg[flaw].get(arm, {}).get("test_main") or {}
            if s.get("mean") is None:
                continue
            x = x0 + j * bw
            parts.append(f'<rect x="{x:.1f}" y="{y(s["mean"]):.1f}" width="{bw - 3:.1f}" height="{y(0) - y(s["mean"]):.1f}" '
                         f'fill="{colours.get(arm, "#999")}"><title>{arm}: {s["mean"]:.3f}</title></rect>')
            if s.get("ci"):
                cx = x + (bw - 3) / 2
                lo, hi = max(0.0, s["ci"][0]), min(1.0, s["ci"][1])
                parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" stroke="#222"/>')
    for j, arm in enumerate(arms):
        parts.append(f'<rect x="{left + j * 120}" y="{h - 22}" width="10" height="10" fill="{colours.get(arm, "#999")}"/>'
                     f'<text x="{left + j * 120 + 14}" y="{h - 13}">{arm}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def check_splits(suite: dict[str, Any], flaws: list[str], smoke: bool) -> dict[str, Any]:
    """The three splits of every flaw's task source are disjoint (the smoke asserts this)."""
    from evo_core.config import load_config
    from evo_core.plugins import PluginManager
    from evo_core.run_setup import build_domain, load_splits

    out = {}
    pm = PluginManager()
    for flaw in flaws:
        f = suite["flaws"][flaw]
        sets = list(suite["defaults"]["set"]) + list(f.get("set", [])) + (list(f.get("smoke", [])) if smoke else [])
        cfg = load_config(str(ROOT / f["config"]), sets)
        domain, _ = build_domain(cfg, pm)
        sp = load_splits(cfg, domain)  # raises when two splits share a task
        ids = [{t.task_id for t in x} for x in (sp.train, sp.validation, sp.test)]
        out[flaw] = {"train": len(ids[0]), "validation": len(ids[1]), "test": len(ids[2]),
                     "disjoint": not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])}
    return out


# --- main ----------------------------------------------------------------------------------


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", action="store_true", help="run the flaw suite (configs/suite/suite.toml)")
    ap.add_argument("--smoke", action="store_true", help="1 seed, 40 steps, every flaw and arm, small model (CI)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--task-seed", type=int, default=None,
                    help="draw train/validation/test with this task seed (a test split development never saw)")
    ap.add_argument("--per-seed-warm-starts", action="store_true",
                    help="each seed trains its own SFT warm start (default: the suite's sft.seed, one per flaw)")
    ap.add_argument("--flaws", nargs="*", default=None, help="flaw names (default: every flaw of the suite but its probes)")
    ap.add_argument("--arms", nargs="*", default=None, help="arms (default: the suite's)")
    ap.add_argument("--ablations", action="store_true", help="also run the ablation arms")
    ap.add_argument("--budget-matched", action="store_true",
                    help=f"also run {MATCHED}: early stopping validating on as many oracle labels as evolving used")
    ap.add_argument("--mode", choices=("cold", "warm", "both"), default="cold")
    ap.add_argument("--audit-sweep", default=None, metavar="FLAW", help="also evolving at audit rate 1.0, 0.1, 0.05, 0.02")
    ap.add_argument("--dir", default=str(ROOT / ".evo" / "suite"), help="one SQLite store per cell (resumable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5400.0, help="seconds per cell")
    ap.add_argument("--read-only", action="store_true", help="aggregate what the stores hold; run nothing")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    ap.add_argument("--figure", default=None, help="write the SVG figure here")
    ap.add_argument("--markdown", default=None, help="write the markdown tables here")
    ap.add_argument("--suite-file", default=str(SUITE))
    ap.add_argument("--include", nargs="*", default=[], metavar="JSON",
                    help="also aggregate the runs of earlier reports (--out files) for cells the stores lack; "
                         "each such row names its source")
    args = ap.parse_args(argv)
    if not (args.suite or args.smoke):
        ap.error("give --suite or --smoke")
    suite = load_suite(Path(args.suite_file))
    flaws = args.flaws or default_flaws(suite)
    unknown = [f for f in flaws if f not in suite["flaws"]]
    if unknown:
        ap.error(f"unknown flaw(s) {unknown}; known: {', '.join(suite['flaws'])}")
    arms = args.arms or list(suite["defaults"]["arms"])
    if args.ablations or (args.smoke and not args.arms):  # a smoke with --arms runs just those
        arms += [a for a in suite["defaults"]["ablations"] if a not in arms]
    if args.budget_matched and MATCHED not in arms:
        arms += [a for a in ("evolving",) if a not in arms] + [MATCHED]
    if args.smoke:
        if not args.arms:
            arms += [a for a in ("fixed+early-stop",) if a not in arms]
        args.seeds = 1
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    log = (lambda m: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    all_cells = cells(suite, flaws, arms, seeds, mode=args.mode, audit_sweep=args.audit_sweep, smoke=args.smoke,
                      per_seed_warm_starts=args.per_seed_warm_starts, task_seed=args.task_seed)
    steps = flaw_sft_steps(suite, flaws)
    warm_starts = len({(c["flaw"], c["warm_seed"]) for c in all_cells})
    t0 = time.perf_counter()
    ran = [] if args.read_only else run_matrix(d, all_cells, all_cells, args.jobs, args.timeout, log, heavy=steps)
    matrix_wall = time.perf_counter() - t0
    read = [r for c in all_cells for r in [read_cell(d, c)] if r is not None]
    rows = [r for r in read if r.get("status") == "completed"]  # a cell still running (or killed) is not a result
    incomplete = sorted(r["cell"] for r in read if r.get("status") != "completed")
    rows += included_rows(args.include, {r["cell"] for r in rows}, flaws, seeds, mode=args.mode)
    result = {
        "command": "python -m benchmarks.evolution " + " ".join(argv if argv is not None else sys.argv[1:]),
        "suite": str(Path(args.suite_file).relative_to(ROOT)) if Path(args.suite_file).is_relative_to(ROOT) else args.suite_file,
        "flaws": flaws, "arms": arms, "seeds": seeds, "mode": args.mode, "smoke": args.smoke,
        "audit_rate": next((s.split("=")[1] for s in suite["defaults"]["set"] if s.startswith("harness.audit.rate")), None),
        "dir": str(d), "total_wall_s": time.perf_counter() - t0,
        "splits": check_splits(suite, flaws, args.smoke),
        "cells": len(all_cells), "cells_read": len(rows), "incomplete": incomplete,
        "failed": [r for r in ran if r.get("returncode")],
        "aggregate": aggregate(rows), "comparisons": comparisons(rows),
        "audit_sweep": aggregate([r for r in rows if "-audit" in r["arm"]]) if args.audit_sweep else None,
        "provenance": provenance(rows),
        "cost": cost(rows, sft_runs(d), steps, jobs=args.jobs, sft_fallback=included_sft_runs(args.include, steps),
                     shared_warm_starts=warm_starts == len(flaws) and len(seeds) > 1),
        "runs": [{k: v for k, v in r.items() if k not in ("diagnosis_kinds",)} for r in rows],
    }
    measured = included_measurements(args.include)
    if any(r["ran"] for r in ran):  # what this invocation's own matrix took, start to end: the measured cost
        measured.append({"cells_ran": sum(1 for r in ran if r["ran"]), "cells": len(all_cells), "seeds": len(seeds),
                         "flaws": len(flaws), "jobs": args.jobs, "wall_s": round(matrix_wall, 1),
                         "warm_starts": warm_starts,
                         "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()})
    if measured:
        result["cost"]["measured"] = measured
    table = markdown(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    if args.figure:
        Path(args.figure).write_text(figure_svg(result))
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(table)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
