"""Weight sync to a server: checkpoint reload and LoRA adapters, recorded as PolicyUpdated."""

from __future__ import annotations

import io
import tarfile

import httpx
import pytest
import torch

from evo_core.serve import ServerThread, build_app, make_host
from evo_core.store import open_store, run_stream
from evo_core.trainer.http_engine import (
    HTTPEngine,
    HTTPEngineConfig,
    HTTPEngineError,
    pack_directory,
    sync_and_record,
)
from evo_core.trainer.policy import HFPolicy, LoraSettings
from evo_core.trainer.protocols import SamplingParams
from evo_core.testing import require

pytestmark = pytest.mark.timeout(300)
PROMPTS = ["12+7=", "3+4=", "55+5=", "9+9="]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=8)


def _texts(rows):
    return [r[0].token_ids for r in rows]


SAMPLED = SamplingParams(n=2, temperature=1.0, max_new_tokens=6, seed=7)


def _served_by(rows, policy, atol=1e-4) -> bool:
    """Whether the server's log-probs (T=1) are ``policy``'s own for the sampled tokens:
    a check on the weights that, unlike greedy text, no near-tie in an untrained model can flip."""
    flat = [s for r in rows for s in r]
    with torch.no_grad():
        lp = policy.logprobs([s.prompt_ids for s in flat], [s.token_ids for s in flat])
    return all(torch.allclose(lp[i, :len(s.token_ids)], torch.tensor(s.logprobs), atol=atol)
               for i, s in enumerate(flat))


def _perturb(module: torch.nn.Module, names: str = "", seed: int = 0, scale: float = 0.5) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in module.named_parameters():
            if names in n:
                p.add_(torch.randn(p.shape, generator=g) * scale)


@pytest.fixture
def server(tiny_dir):
    host = make_host(tiny_dir, name="tiny")
    with ServerThread(build_app(host)) as url:
        yield url, host


def test_checkpoint_reload_changes_outputs_and_is_recorded(server, tiny_dir, tmp_path):
    url, host = server
    store = open_store("memory://")
    trained = HFPolicy.load(tiny_dir)
    with HTTPEngine(HTTPEngineConfig(base_url=url, model="tiny", sync_mode="checkpoint",
                                     sync_dir=str(tmp_path / "sync"))) as eng:
        before = eng.generate(PROMPTS, GREEDY)
        _perturb(trained.model, seed=1)
        assert _texts(trained.sample(PROMPTS, GREEDY)) != _texts(before)
        assert _served_by(eng.generate(PROMPTS, SAMPLED), HFPolicy.load(tiny_dir))
        ev = sync_and_record(eng, trained, store=store, run_id="r1", step=3, version=2)
        after = eng.generate(PROMPTS, GREEDY)
        sampled = eng.generate(PROMPTS, SAMPLED)
    assert host.weights_version == 1
    # the server now samples from exactly the trained weights
    assert _served_by(sampled, trained) and not _served_by(sampled, HFPolicy.load(tiny_dir))
    assert _texts(after) != _texts(before)
    logged = list(store.events(run_stream("r1")))
    assert [type(e).__name__ for e in logged] == ["PolicyUpdated"] and logged[0] == ev
    assert ev.step == 3 and ev.policy_version == 2 and not ev.adapter and ev.digest == trained.digest()
    # the blob is the checkpoint: unpack it and load it back
    blob = store.blobs.get(ev.checkpoint)
    out = tmp_path / "restored"
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(out, filter="data")
    assert HFPolicy.load(str(out)).digest() == trained.digest()


def test_pack_directory_is_reproducible(tiny_dir):
    assert pack_directory(tiny_dir) == pack_directory(tiny_dir)


def test_reload_of_a_missing_path_is_a_clear_error(server, tmp_path):
    url, _ = server
    r = httpx.post(url + "/update_weights_from_disk", json={"model_path": str(tmp_path / "nope")})
    assert r.status_code == 400 and "not a directory" in r.json()["error"]["message"]


def test_lora_adapter_sync(server, tiny_dir, tmp_path):
    require("peft", "LoRA needs the 'lora' extra")
    url, host = server
    store = open_store("memory://")
    policy = HFPolicy.load(tiny_dir)
    torch.manual_seed(0)  # lora_A's init draws from the global RNG: keep the test order-independent
    policy.enable_lora(LoraSettings(r=4, alpha=8))
    with HTTPEngine(HTTPEngineConfig(base_url=url, model="tiny", sync_mode="lora",
                                     sync_dir=str(tmp_path / "sync"))) as eng:
        for version in (1, 2):
            _perturb(policy.model, names="lora_B", seed=version, scale=2.0)  # B starts at 0: make it matter
            ev = sync_and_record(eng, policy, store=store, run_id="r2", step=version, version=version)
            assert eng.model == f"tiny-v{version}" and ev.adapter
            sampled = eng.generate(PROMPTS, SAMPLED)
            assert _served_by(sampled, policy), f"server is not sampling from adapter v{version}"
        # the adapter changed the served distribution (greedy text may not move: the
        # untrained model's argmax is one dominant token)
        assert not _served_by(sampled, HFPolicy.load(tiny_dir))
    served = [m["id"] for m in httpx.get(url + "/v1/models").json()["data"]]
    assert served == ["tiny", "tiny-v2"]  # keep_adapters=1 unloaded v1
    assert len(list(store.events(run_stream("r2")))) == 2


def test_lora_sync_needs_a_lora_policy(server, tiny_dir, tmp_path):
    url, _ = server
    with HTTPEngine(HTTPEngineConfig(base_url=url, model="tiny", sync_mode="lora", sync_dir=str(tmp_path))) as eng:
        with pytest.raises(HTTPEngineError, match="LoRA"):
            eng.sync_weights(HFPolicy.load(tiny_dir), 1)
