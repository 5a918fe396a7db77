"""The GPU check: one command that says, within about 6 minutes on one H200, how fast the
trainer trains and how long an RL step takes, and where the time goes.

Phases (each a child process under its own budget; budgets sum to 360 s on a GPU):

| phase | what | GPU budget |
|---|---|---|
| probe | torch, CUDA device, transformers, deepspeed: what this machine has | 20 s |
| anchor_bf16 | plain torch, bf16 weights, fused AdamW: Qwen2-0.5B shape, 8 x 1024 tokens | 40 s |
| anchor_autocast | plain torch, fp32 master weights, bf16 autocast (like-for-like with DeepSpeed bf16), profiled | 40 s |
| engine | the recipes' engine: DeepSpeed ZeRO-2 bf16 on one GPU (plain engine without deepspeed), profiled | 60 s |
| rl | 3 RL steps of the math recipe, 64 prompts x 8 samples x 256 tokens, in-process rollouts | 200 s |

Every phase prints progress lines as it goes; the JSON (``OUT/gpu_check.json``) is rewritten
after each phase with its status (ok, failed, overrun), wall time and figures, so a check cut
short still says what finished. ``--cpu`` runs the same phases at toy sizes.

    python -m benchmarks.gpu_check                        # on a GPU machine
    python -m benchmarks.gpu_check --cpu                  # CI-sized, on the CPU
    python -m benchmarks.gpu_check --wheelhouse .gpu/wheels   # install the project from wheels first (no network)
    python -m benchmarks.gpu_check --build-wheelhouse .gpu/wheels   # build those wheels here, then stop
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from benchmarks.gpu_phases import Phase, read_json, run_phase, say, write_json

ROOT = Path(__file__).resolve().parents[1]
GPU_BUDGETS = {"probe": 20, "anchor_bf16": 40, "anchor_autocast": 40, "engine": 60, "rl": 200}
CPU_BUDGETS = {"probe": 60, "anchor_bf16": 120, "anchor_autocast": 120, "engine": 180, "rl": 300}
GOALS = {"rl_steps": 3, "rl_step_s": 30.0, "ratio_to_anchor": 0.8, "peak_mem_vs_anchor": 1.10, "wall_s": 360}


def probe(out: Path, cpu: bool) -> int:
    """What this machine has; exit 2 (one line) when a GPU run finds no CUDA device."""
    import importlib.util

    import torch
    import transformers

    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                            "cuda": torch.version.cuda, "transformers": transformers.__version__,
                            "cuda_available": torch.cuda.is_available(), "evo_core": str(Path(__import__("evo_core").__file__).parent)}
    if importlib.util.find_spec("deepspeed") is not None:
        from importlib import metadata

        info["deepspeed"] = metadata.version("deepspeed")
    else:
        info["deepspeed"] = None
    info["evo_math"] = importlib.util.find_spec("evo_math") is not None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(device=p.name, device_mem_gib=round(p.total_memory / 2**30, 1), device_count=torch.cuda.device_count())
    else:
        info["device"] = "cpu"
    write_json(out, info)
    print("probe: " + ", ".join(f"{k}={v}" for k, v in info.items()), flush=True)
    if not cpu and not torch.cuda.is_available():
        print("error: torch sees no CUDA device here; use --cpu for the toy-size run", file=sys.stderr)
        return 2
    if not info["evo_math"]:
        print("error: the math domain (evo_math) is not importable: install domains/math (or --wheelhouse DIR)",
              file=sys.stderr)
        return 2
    return 0


def phases(cpu: bool, work: Path, model_dir: str) -> list[Phase]:
    budgets = CPU_BUDGETS if cpu else GPU_BUDGETS
    flag = ["--cpu"] if cpu else []
    env = {"DS_ACCELERATOR": "cpu" if cpu else "cuda", "EVO_NO_PLUGIN_COMMANDS": "1"}
    if cpu:
        env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
    train = [Phase(name, ["-m", "benchmarks.gpu_train", "--mode", mode, *flag, *prof], budgets[name], env)
             for name, mode, prof in (("anchor_bf16", "bf16", []), ("anchor_autocast", "autocast", ["--profile"]),
                                      ("engine", "engine", ["--profile"]))]
    rl = ["-m", "benchmarks.gpu_rl", "--work", str(work / "rl"), *flag] + (["--model-dir", model_dir] if model_dir else [])
    return [Phase("probe", ["-m", "benchmarks.gpu_check", "--probe", *flag], budgets["probe"], env),
            *train, Phase("rl", rl, budgets["rl"], env)]


def _fig(record: Optional[dict], key: str) -> Any:
    return ((record or {}).get("result") or {}).get(key)


def summarize(report: dict[str, Any], cpu: bool) -> dict[str, Any]:
    """The headline figures and the goals they meet (``None`` where a phase has none)."""
    ph = report["phases"]
    s: dict[str, Any] = {}
    eng, auto, bf16 = (_fig(ph.get(n), "tokens_per_s") for n in ("engine", "anchor_autocast", "anchor_bf16"))
    s["engine"] = _fig(ph.get("engine"), "engine")
    s["engine_tokens_per_s"], s["anchor_autocast_tokens_per_s"], s["anchor_bf16_tokens_per_s"] = eng, auto, bf16
    s["ratio_to_anchor"] = round(eng / auto, 3) if eng and auto else None  # like-for-like: fp32 master weights
    s["ratio_to_bf16_anchor"] = round(eng / bf16, 3) if eng and bf16 else None
    em, am = _fig(ph.get("engine"), "peak_mem_gib"), _fig(ph.get("anchor_autocast"), "peak_mem_gib")
    s["engine_peak_mem_gib"], s["anchor_autocast_peak_mem_gib"] = em, am
    s["peak_mem_vs_anchor"] = round(em / am, 3) if em and am else None
    steps = _fig(ph.get("rl"), "steps") or []
    s["rl_steps"] = len(steps)
    walls = [x["step_wall_s"] for x in steps if x.get("step_wall_s") is not None]
    s["rl_step_wall_s"] = walls
    s["rl_step_s_min"] = min(walls) if walls else None
    if steps:  # where a typical step's time goes: the median step by wall time
        mid = sorted(steps, key=lambda x: x["step_wall_s"])[len(steps) // 2]
        parts = {k: mid.get(k) or 0.0 for k in ("rollout_s", "grading_s", "update_s", "sync_s", "digest_s",
                                                 "checkpoint_s", "harness_s", "eval_s", "log_s")}
        parts["other_s"] = round(max(0.0, mid["step_wall_s"] - sum(parts.values())), 3)
        s["rl_time_split"] = {"step": mid["step"], "step_wall_s": mid["step_wall_s"], **parts}
    s["goals"] = None if cpu else {
        "rl_steps>=3": s["rl_steps"] >= GOALS["rl_steps"],
        "rl_step<=30s": s["rl_step_s_min"] is not None and s["rl_step_s_min"] <= GOALS["rl_step_s"],
        "ratio_to_anchor>=0.8": s["ratio_to_anchor"] is not None and s["ratio_to_anchor"] >= GOALS["ratio_to_anchor"],
        "peak_mem<=anchor+10%": s["peak_mem_vs_anchor"] is not None and s["peak_mem_vs_anchor"] <= GOALS["peak_mem_vs_anchor"],
        "wall<=360s": report.get("phases_wall_s", 1e9) <= GOALS["wall_s"]}
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="toy sizes on the CPU (CI)")
    ap.add_argument("--out", default=None, help="folder for gpu_check.json and the phase logs (default $OUT, else .gpu/out)")
    ap.add_argument("--wheelhouse", default=None, metavar="DIR",
                    help="install the project and its pure-Python deps from DIR (--no-deps --no-index) before the phases")
    ap.add_argument("--build-wheelhouse", default=None, metavar="DIR", help="build that wheelhouse here and stop")
    ap.add_argument("--model-dir", default="", help="RL phase: a local HF model directory instead of the built one")
    ap.add_argument("--only", default="", help="comma-separated phases to run (default all)")
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    from benchmarks import gpu_wheelhouse

    if a.probe:
        return probe(Path(a.out), a.cpu)
    if a.build_wheelhouse:
        try:
            gpu_wheelhouse.build(Path(a.build_wheelhouse))
        except gpu_wheelhouse.WheelhouseError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    out = Path(a.out or os.environ.get("OUT") or ROOT / ".gpu" / "out")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="evo-gpu-check-"))
    report: dict[str, Any] = {"check": "benchmarks.gpu_check", "mode": "cpu" if a.cpu else "gpu",
                              "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "code_version": _code_version(), "budgets_s": CPU_BUDGETS if a.cpu else GPU_BUDGETS,
                              "phases": {}}
    if a.wheelhouse:  # outside the phases' budgets: installation is excluded from the 6 minutes
        t = time.monotonic()
        site = work / "site"
        try:
            n = gpu_wheelhouse.install(Path(a.wheelhouse), site)
        except gpu_wheelhouse.WheelhouseError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        os.environ["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        report["install"] = {"wheels": n, "wall_s": round(time.monotonic() - t, 1), "target": str(site)}
        say(f"installed {n} wheels from {a.wheelhouse} in {report['install']['wall_s']} s (--no-deps, no index)")
    else:  # the children import benchmarks.* and evo_core from this checkout
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    only = {x for x in a.only.split(",") if x}
    report_path = out / "gpu_check.json"
    t0 = time.monotonic()
    for phase in phases(a.cpu, work, a.model_dir):
        if only and phase.name not in only and phase.name != "probe":
            continue
        record = run_phase(phase, work, out)
        report["phases"][phase.name] = record
        report["phases_wall_s"] = round(time.monotonic() - t0, 1)
        report["summary"] = summarize(report, a.cpu)
        write_json(report_path, report)
        if phase.name == "probe" and record["status"] != "ok":
            write_json(report_path, report)
            why = (out / "probe.log").read_text().strip().splitlines()
            print(next((ln for ln in reversed(why) if ln.startswith("error:")), "error: the probe failed (see probe.log)"),
                  file=sys.stderr)
            return 2
    report["overran"] = [n for n, r in report["phases"].items() if r["status"] == "overrun"]
    report["ok"] = all(r["status"] == "ok" for r in report["phases"].values())
    report["summary"] = summarize(report, a.cpu)
    write_json(report_path, report)
    s = report["summary"]
    say(f"done in {report['phases_wall_s']} s: ok={report['ok']}, overran={report['overran']}, "
        f"ratio_to_anchor={s['ratio_to_anchor']}, RL steps={s['rl_steps']} {s['rl_step_wall_s']}")
    if s.get("rl_time_split"):
        say("RL step time: " + ", ".join(f"{k} {v}" for k, v in s["rl_time_split"].items()))
    say(f"JSON: {report_path}")
    # the short form last (a caller that keeps only the output's tail keeps this); the full one is the file
    short = {"ok": report["ok"], "overran": report["overran"], "phases_wall_s": report["phases_wall_s"],
             "phases": {n: {"status": r["status"], "wall_s": r["wall_s"]} for n, r in report["phases"].items()},
             "summary": s}
    print(json.dumps(short, default=str), flush=True)
    return 0 if report["ok"] else 1


def _code_version() -> Optional[str]:
    try:
        from evo_core.code_version import code_version

        return code_version()
    except Exception:
        return None


__all__ = ["main", "summarize", "phases", "read_json"]

if __name__ == "__main__":
    raise SystemExit(main())
