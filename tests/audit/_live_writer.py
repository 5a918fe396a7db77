"""Writer process for the tail test: appends a generated run step by step; after half of
it, waits for GOFILE (the test creates it once ``evo tail`` has shown that half), so the
second half can only reach the tail by following."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from evo_core.store import open_store, run_stream
from evo_core.synthetic import iter_run_batches

if __name__ == "__main__":
    url, run_id, steps, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    store = open_store(url)
    stream = run_stream(run_id)
    version = 0
    for i, batch in enumerate(iter_run_batches(run_id, steps=steps, rollouts_per_step=6, seed=1)):
        store.append(stream, batch, expected_version=version)
        version += len(batch)
        if i == steps // 2:
            deadline = time.time() + 60
            while not go.exists():
                if time.time() > deadline:
                    sys.exit("writer: the tail never caught up")
                time.sleep(0.02)
        time.sleep(0.02)
    print(version, flush=True)
