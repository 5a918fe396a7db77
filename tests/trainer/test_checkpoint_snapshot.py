"""``checkpoints.snapshot``: the copy a background checkpoint writer serialises while the next
step trains. It must not alias live tensors, must keep tied weights tied, and must load back."""

from __future__ import annotations

import collections
import io

import torch

from evo_core.checkpoints import snapshot


def _state() -> dict:
    lin = torch.nn.Linear(3, 2)
    sd = lin.state_dict()
    opt = torch.optim.Adam(lin.parameters(), lr=0.1)
    lin(torch.ones(1, 3)).sum().backward()
    opt.step()
    shared = torch.arange(4.0)
    return {"model": sd, "opt": opt.state_dict(), "tied": [shared, shared], "rng": torch.get_rng_state(), "step": 7}


def test_snapshot_does_not_alias_live_tensors() -> None:
    live = _state()
    snap = snapshot(live)
    before = snap["model"]["weight"].clone()
    live["model"]["weight"].add_(1.0)
    live["tied"][0].mul_(0)
    assert torch.equal(snap["model"]["weight"], before)
    assert torch.equal(snap["tied"][1], torch.arange(4.0))


def test_snapshot_keeps_one_tensor_under_two_names() -> None:
    snap = snapshot(_state())
    assert snap["tied"][0] is snap["tied"][1]


def test_snapshot_keeps_state_dict_metadata_and_loads_back() -> None:
    live = _state()
    assert isinstance(live["model"], collections.OrderedDict) and hasattr(live["model"], "_metadata")
    snap = snapshot(live)
    assert type(snap["model"]) is type(live["model"])
    assert snap["model"]._metadata == live["model"]._metadata
    buf = io.BytesIO()
    torch.save(snap, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    fresh = torch.nn.Linear(3, 2)
    fresh.load_state_dict(back["model"])
    assert torch.equal(fresh.weight, live["model"]["weight"])
    assert back["step"] == 7 and torch.equal(back["rng"], live["rng"])
    assert back["opt"]["state"][0]["step"] == live["opt"]["state"][0]["step"]
