"""Run or resume one simulated run in its own process (so a fault point can kill it).

    python -m tests.trainer.sim_driver STORE_URL RUN_ID CHECKPOINT_DIR STEPS [--resume]
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    from evo_core.config import config_from_dict
    from evo_core.loop import RunLoop
    from evo_core.simulation import sim_config, sim_factory
    from evo_core.store import open_store
    from evo_core.testing import isolated_plugins

    url, run_id, ck, steps = argv[0], argv[1], argv[2], int(argv[3])
    cfg = config_from_dict(sim_config(steps=steps, seed=3, eval_every=5, checkpoint_dir=ck)).for_arm("evolving")
    store = open_store(url)
    loop = RunLoop(cfg, store, plugins=isolated_plugins(), session_factory=sim_factory())
    if "--resume" in argv:
        loop.resume(run_id)
    else:
        loop.start(run_id=run_id)
    loop.run()
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
