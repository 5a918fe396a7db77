"""Test-split learning curves of a quickstart-shaped run, as JSON and an SVG figure.

    python -m benchmarks.trainer_curve --arm reference --steps 200 --svg docs/figures/trainer-reference.svg
    python -m benchmarks.trainer_curve --arm fixed --flaw hedge --steps 200
    python -m benchmarks.trainer_curve --from-store sqlite:///.evo/quickstart.sqlite --run RUN_ID --svg out.svg

``reference`` trains on the strict oracle (the no-flaw reference), ``fixed`` on the flawed
verifier with a harness that only watches; ``--from-store`` reads an existing run's
``EvalCompleted`` events instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

COLORS = {"strict_accuracy": "#1f77b4", "strict_accuracy_greedy": "#2ca02c", "train_reward": "#d62728",
          "hack_rate": "#ff7f0e"}


def svg(curves: dict[str, list[tuple[int, float]]], title: str, width: int = 640, height: int = 360) -> str:
    pad_l, pad_r, pad_t, pad_b = 50, 160, 30, 40
    steps = [s for pts in curves.values() for s, _ in pts] or [0, 1]
    x0, x1 = min(steps), max(max(steps), min(steps) + 1)
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def X(s: float) -> float:
        return pad_l + w * (s - x0) / (x1 - x0)

    def Y(v: float) -> float:
        return pad_t + h * (1 - v)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{pad_l}" y="18" font-size="14">{title}</text>']
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{pad_l - 8}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    for s in sorted(set(steps)):
        out.append(f'<text x="{X(s):.1f}" y="{pad_t + h + 16}" text-anchor="middle" font-size="10">{s}</text>')
    out.append(f'<text x="{pad_l + w / 2}" y="{height - 6}" text-anchor="middle">RL step</text>')
    for i, (name, pts) in enumerate(curves.items()):
        color = COLORS.get(name, "#555")
        path = " ".join(f"{X(s):.1f},{Y(v):.1f}" for s, v in pts)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for s, v in pts:
            out.append(f'<circle cx="{X(s):.1f}" cy="{Y(v):.1f}" r="2.5" fill="{color}"/>')
        y = pad_t + 10 + 18 * i
        out.append(f'<line x1="{pad_l + w + 12}" x2="{pad_l + w + 30}" y1="{y}" y2="{y}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{pad_l + w + 34}" y="{y + 4}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.toml")
    ap.add_argument("--arm", default="reference", choices=("reference", "fixed"))
    ap.add_argument("--flaw", default="hedge")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: the config's)")
    ap.add_argument("--from-store", default=None)
    ap.add_argument("--run", default=None)
    ap.add_argument("--svg", default=None)
    args = ap.parse_args(argv)

    from evo_core.store import open_store, run_stream
    from evo_events import EvalCompleted

    if args.from_store:
        store = open_store(args.from_store)
        run_id = args.run or store.runs()[-1]
        title = f"run {run_id}"
    else:
        from evo_core.config import load_config
        from evo_core.loop import RunLoop
        from evo_core.trainer.logs import configure_logging

        configure_logging("WARNING")
        cfg = load_config(args.config, [
            f'task.options.flaw="{args.flaw}"', f"run.steps={args.steps}", f"run.eval_every={args.eval_every}",
            f"run.seed={args.seed}", f"run.checkpoint_dir='{tempfile.mkdtemp()}'",
        ] + ([f"run.threads={args.threads}"] if args.threads else [])).for_arm(args.arm)
        store = open_store("memory://")
        loop = RunLoop(cfg, store)
        loop.start()
        loop.run()
        run_id = loop.run_id
        reward = "the strict oracle" if args.arm == "reference" else f"the {args.flaw} verifier"
        title = f"GRPO on {reward}, seed {args.seed}: test split"
    evals = [e for e in store.events(run_stream(run_id)) if isinstance(e, EvalCompleted) and e.branch == "main"
             and e.split == "test"]
    curves = {k: [(e.step, e.metrics[k]) for e in evals if e.metrics.get(k) is not None] for k in COLORS}
    print(json.dumps({"run_id": run_id, "curves": curves}))
    if args.svg:
        with open(args.svg, "w") as fh:
            fh.write(svg(curves, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
