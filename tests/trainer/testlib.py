"""Shared tiny settings for the trainer tests."""

from __future__ import annotations

TINY_MODEL = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 64}
SOURCE = "generate://addition?digits=2&validation=20&test=20&seed=0"
# The same tiny model and task as TOML, for tests that write a config file for `evo run`.
TINY_TOML = f'[task]\ntrain = "{SOURCE}"\n[policy.tiny]\n' + "".join(f"{k} = {v}\n" for k, v in TINY_MODEL.items())


def tiny_config_dict(tmp_path, **over) -> dict:
    d = {
        "run": {"name": "t", "steps": 4, "eval_every": 2, "harnesses": ["fixed"], "checkpoint_dir": str(tmp_path / "ck"),
                "progress": False, "threads": 1},
        "task": {"train": SOURCE},
        "policy": {"tiny": dict(TINY_MODEL)},
        "rl": {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 4, "lr": 1e-3, "warmup_steps": 0},
        "eval": {"samples": 2},
    }
    for k, v in over.items():
        d.setdefault(k, {}).update(v)
    return d


