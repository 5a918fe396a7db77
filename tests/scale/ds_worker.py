"""One rank of the 2-rank DeepSpeed test: one update of a tiny Qwen2 model on this
rank's half of a fixed batch; rank 0 saves the updated weights. Run by launch_local as
``python -m tests.scale.ds_worker`` with the repository root on PYTHONPATH."""

from __future__ import annotations

import json
import os
import sys

import torch

torch.set_num_threads(1)

from evo_core.trainer.distributed import DeepSpeedSettings, wrap_model  # noqa: E402
from tests.scale.ds_common import make_batch, make_model, token_loss  # noqa: E402


def main() -> None:
    out_path, settings_json = sys.argv[1], sys.argv[2]
    settings = DeepSpeedSettings.from_mapping(json.loads(settings_json))
    model = make_model()
    engine = wrap_model(model, settings)
    ids = make_batch()
    per_rank = ids.shape[0] // engine.world_size
    mine = ids[engine.rank * per_rank:(engine.rank + 1) * per_rank]
    loss = token_loss(engine.module, mine)
    engine.backward(loss)
    engine.step()
    state = engine.full_state_dict()
    if engine.rank == 0:
        torch.save({"state": state, "loss": float(loss), "world_size": engine.world_size}, out_path)
    engine.close()
    print(f"rank {engine.rank}/{engine.world_size} loss={float(loss):.6f} ok", flush=True)


if __name__ == "__main__":
    main()
    # Skip interpreter teardown: with gloo/DeepSpeed threads still alive it sometimes
    # aborts (exit -6) after the work is done and reported, which would fail the test
    # for a reason that is not the update under test.
    sys.stdout.flush()
    os._exit(0)
