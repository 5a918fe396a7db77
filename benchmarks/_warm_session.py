"""What the two A/B benchmarks of the trainer (``sampling.py``, ``update.py``) share: their
command line and the session they time, built as a run builds it (SFT warm start from the cache)."""

from __future__ import annotations

import argparse
from typing import Any


def parser(doc: str, pairs: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.toml")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")
    ap.add_argument("--repeats", type=int, default=3, help=f"{pairs} pairs of each workload")
    ap.add_argument("--steps", type=int, default=2, help="RL steps per timed pass")
    ap.add_argument("--json", action="store_true")
    return ap


def warm_session(args: argparse.Namespace) -> Any:
    """The configured session on one thread, quiet."""
    import torch

    from evo_core.config import load_config
    from evo_core.plugins import PluginManager
    from evo_core.run_setup import build_session
    from evo_core.trainer.logs import configure_logging

    configure_logging("WARNING")
    cfg = load_config(args.config, ["run.threads=1", "run.progress=false", *args.set])
    session, _ = build_session(cfg, PluginManager())
    torch.set_num_threads(1)
    return session
