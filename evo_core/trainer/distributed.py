"""DeepSpeed ZeRO (stages 0-3) for policy updates, configured from the run config.

``deepspeed`` is an extra (``pip install evotrainer[deepspeed]``) and is imported only
inside the functions here. On a machine without CUDA we select DeepSpeed's CPU
accelerator (``DS_ACCELERATOR=cpu``) *before* the first import, because DeepSpeed
picks its accelerator once per process; the CPU accelerator talks over ``gloo``
(or ``ccl`` if oneCCL bindings happen to be installed). No extra package beyond
``deepspeed`` itself (which pulls ``py-cpuinfo``, ``hjson``, ``psutil``, ``ninja``,
``msgpack``) is needed for CPU runs: no op is compiled, because we hand DeepSpeed a
plain ``torch.optim`` optimizer instead of its fused/CPU-Adam kernels.

Typical use, one process per rank (``deepspeed``/``torchrun`` launcher, or
:func:`launch_local` for tests)::

    settings = DeepSpeedSettings.from_mapping(run_config["deepspeed"])
    engine = wrap_model(model, settings)
    loss = compute_loss(engine.module, batch)
    engine.backward(loss)
    engine.step()
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Any, Mapping, Optional, Sequence

import attrs

__all__ = [
    "DeepSpeedMissing",
    "DeepSpeedSettings",
    "DistributedEngine",
    "build_ds_config",
    "free_port",
    "import_deepspeed",
    "init_distributed",
    "launch_local",
    "adamw",
    "make_optimizer",
    "prepare_deepspeed",
    "select_accelerator",
    "wrap_model",
]

_PRECISIONS = ("fp32", "bf16", "fp16")
_ACCELERATORS = ("auto", "cpu", "cuda")
_OPTIMIZERS = ("adamw", "sgd")


class DeepSpeedMissing(ImportError):
    """The ``deepspeed`` extra is not installed."""


def _choice(options: Sequence[str]):
    def check(inst: Any, attr: attrs.Attribute, value: Any) -> None:
        if value not in options:
            raise ValueError(f"deepspeed.{attr.name} must be one of {', '.join(options)}, got {value!r}")

    return check


def _int_range(lo: int, hi: Optional[int] = None):
    def check(inst: Any, attr: attrs.Attribute, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"deepspeed.{attr.name} must be an integer, got {value!r}")
        if value < lo or (hi is not None and value > hi):
            rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ValueError(f"deepspeed.{attr.name} must be in {rng}, got {value}")

    return check


def _nonneg_float(inst: Any, attr: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"deepspeed.{attr.name} must be a non-negative number, got {value!r}")


@attrs.frozen(kw_only=True)
class DeepSpeedSettings:
    """The ``[deepspeed]`` table of a run config."""

    zero_stage: int = attrs.field(default=1, validator=_int_range(0, 3))
    micro_batch_size: int = attrs.field(default=1, validator=_int_range(1))
    grad_accum_steps: int = attrs.field(default=1, validator=_int_range(1))
    precision: str = attrs.field(default="fp32", validator=_choice(_PRECISIONS))
    optimizer: str = attrs.field(default="adamw", validator=_choice(_OPTIMIZERS))
    lr: float = attrs.field(default=1e-4, converter=float, validator=_nonneg_float)
    betas: tuple[float, float] = attrs.field(default=(0.9, 0.999), converter=lambda b: tuple(float(x) for x in b))
    eps: float = attrs.field(default=1e-8, converter=float, validator=_nonneg_float)
    weight_decay: float = attrs.field(default=0.0, converter=float, validator=_nonneg_float)
    grad_clip: float = attrs.field(default=1.0, converter=float, validator=_nonneg_float)
    offload_optimizer: bool = False  # ZeRO-Offload of optimizer states to CPU RAM
    offload_params: bool = attrs.field(default=False)  # ZeRO-3 only: parameters in CPU RAM
    accelerator: str = attrs.field(default="auto", validator=_choice(_ACCELERATORS))
    gradient_checkpointing: bool = False
    # ZeRO-3: parameters with fewer elements than this stay whole on every rank (DeepSpeed's
    # stage3_param_persistence_threshold); 0 partitions every parameter
    persistence_threshold: int = attrs.field(default=100_000, validator=_int_range(0))

    @betas.validator
    def _check_betas(self, attr: attrs.Attribute, value: tuple[float, ...]) -> None:
        if len(value) != 2 or not all(0.0 <= b < 1.0 for b in value):
            raise ValueError(f"deepspeed.betas must be two numbers in [0, 1), got {value!r}")

    @offload_params.validator
    def _check_offload(self, attr: attrs.Attribute, value: bool) -> None:
        if value and self.zero_stage != 3:
            raise ValueError("deepspeed.offload_params needs zero_stage = 3")

    @classmethod
    def from_mapping(cls, data: Optional[Mapping[str, Any]]) -> "DeepSpeedSettings":
        """Validate a config table; an unknown key is an error that names it."""
        data = dict(data or {})
        known = {a.name for a in attrs.fields(cls)}
        for key in data:
            if key not in known:
                raise ValueError(f"unknown key deepspeed.{key} (known: {', '.join(sorted(known))})")
        return cls(**data)


def build_ds_config(settings: DeepSpeedSettings, world_size: int) -> dict[str, Any]:
    """The ``ds_config`` dict DeepSpeed expects. The optimizer is passed as an object
    (see :func:`wrap_model`), so no ``optimizer`` section: that keeps DeepSpeed from
    JIT-building its fused Adam kernels, which a CPU box cannot compile quickly."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    zero: dict[str, Any] = {"stage": settings.zero_stage}
    cuda = _on_cuda(settings.accelerator)
    if settings.zero_stage >= 1:
        # Bucket sizes are element counts. DeepSpeed's defaults (5e8) make tiny CPU models
        # allocate huge flat buffers; on a GPU, 2e8 keeps a 0.5B model to 3 reduce buckets
        # (5e7 made 10, each its own launch and copy). Gradients go to one contiguous
        # buffer; the reduction overlaps the backward where there is a peer to talk to.
        bucket = int(2e8) if cuda else int(5e7)
        zero.update(reduce_bucket_size=bucket, allgather_bucket_size=bucket, contiguous_gradients=True,
                    overlap_comm=bool(cuda and world_size > 1))
    if settings.zero_stage == 3:
        zero.update(stage3_prefetch_bucket_size=int(5e7), stage3_param_persistence_threshold=settings.persistence_threshold,
                    stage3_gather_16bit_weights_on_model_save=True)
    if settings.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": False}
    if settings.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": False}
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": settings.micro_batch_size,
        "gradient_accumulation_steps": settings.grad_accum_steps,
        "train_batch_size": settings.micro_batch_size * settings.grad_accum_steps * world_size,
        "gradient_clipping": settings.grad_clip,
        "zero_optimization": zero,
        # ZeRO vets client optimizers against a list; plain SGD is fine but not listed.
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10**9,  # our own metrics/logging, not DeepSpeed's
        "wall_clock_breakdown": False,
    }
    if settings.precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif settings.precision == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 16}
    return cfg


def select_accelerator(preference: str = "auto") -> str:
    """Choose DeepSpeed's accelerator and export ``DS_ACCELERATOR`` before import.

    "auto" means CUDA when torch sees a GPU, else the CPU accelerator."""
    if preference not in _ACCELERATORS:
        raise ValueError(f"accelerator must be one of {', '.join(_ACCELERATORS)}, got {preference!r}")
    if preference == "auto":
        import torch

        preference = "cuda" if torch.cuda.is_available() else "cpu"
    already = sys.modules.get("deepspeed.accelerator.real_accelerator")
    current = getattr(already, "ds_accelerator", None) if already else None
    if current is not None and current.device_name() != preference:
        raise RuntimeError(
            f"DeepSpeed already chose the {current.device_name()!r} accelerator in this process; "
            f"set DS_ACCELERATOR={preference} before importing deepspeed"
        )
    os.environ["DS_ACCELERATOR"] = preference
    return preference


def import_deepspeed(accelerator: str = "auto") -> Any:
    """``import deepspeed`` with the accelerator chosen first, or a clear error."""
    select_accelerator(accelerator)
    try:
        import deepspeed
    except ImportError as exc:
        raise DeepSpeedMissing(
            "DeepSpeed is not installed: pip install 'evotrainer[deepspeed]' "
            f"(import failed: {exc})"
        ) from exc
    return deepspeed


def prepare_deepspeed(accelerator: str = "auto") -> Any:
    """Import DeepSpeed for a process that joins its process group itself (``evo run``): the
    accelerator chosen first, and on the CPU the shared-memory op build skipped (see
    :func:`_skip_cpu_shm_op`). Raises ``DeepSpeedMissing`` without the extra."""
    ds = import_deepspeed(accelerator)
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() == "cpu" and os.environ.get("EVO_DS_CPU_SHM") != "1":
        _skip_cpu_shm_op()
    return ds


def init_distributed(accelerator: str = "auto", *, timeout_s: float = 300.0) -> tuple[int, int]:
    """Join the process group described by the launcher's env (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT, LOCAL_RANK); a single process with none of them set
    becomes a world of one. Returns (rank, world_size)."""
    import datetime

    import torch.distributed as dist

    ds = import_deepspeed(accelerator)
    for key, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, default)
    if "MASTER_PORT" not in os.environ:
        if os.environ["WORLD_SIZE"] != "1":
            raise RuntimeError("MASTER_PORT is not set: start ranks with a launcher (deepspeed, torchrun) or launch_local")
        os.environ["MASTER_PORT"] = str(free_port())
    if not dist.is_initialized():
        from deepspeed.accelerator import get_accelerator

        if get_accelerator().device_name() == "cpu" and os.environ.get("EVO_DS_CPU_SHM") != "1":
            _skip_cpu_shm_op()
        backend = get_accelerator().communication_backend_name()
        ds.init_distributed(dist_backend=backend, timeout=datetime.timedelta(seconds=timeout_s),
                            auto_mpi_discovery=False)
    return dist.get_rank(), dist.get_world_size()


def _skip_cpu_shm_op() -> None:
    """DeepSpeed's CPU backend JIT-compiles a shared-memory all-reduce (C++ via ninja,
    ~40 s on 2 cores, and it needs a compiler) on every first init. It only speeds up
    *inference* all-reduce; training collectives go through gloo either way. Marking
    the op incompatible makes DeepSpeed skip the build (its own code checks this table).
    Set EVO_DS_CPU_SHM=1 to build and use it."""
    try:
        import deepspeed.ops as ops
        from deepspeed.accelerator import get_accelerator

        builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
        if builder is not None and isinstance(getattr(ops, "__compatible_ops__", None), dict):
            ops.__compatible_ops__[builder.NAME] = False
    except Exception:  # an internal layout change: fall back to DeepSpeed's default
        pass


@attrs.define
class DistributedEngine:
    """A thin, typed face over a DeepSpeed engine: the trainer calls these four things."""

    engine: Any
    settings: DeepSpeedSettings
    rank: int
    world_size: int

    @property
    def module(self) -> Any:
        return self.engine.module

    @property
    def device(self) -> Any:
        return self.engine.device

    def backward(self, loss: Any) -> None:
        self.engine.backward(loss)

    def step(self) -> None:
        """Optimizer step (DeepSpeed applies it at gradient-accumulation boundaries)."""
        self.engine.step()

    def full_state_dict(self) -> dict[str, Any]:
        """The full fp32-equivalent weights on every rank, gathered under ZeRO-3."""

        params = dict(self.engine.module.named_parameters())
        if self.settings.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(params.values()), modifier_rank=None):
                return {k: v.detach().float().cpu().clone() for k, v in params.items()}
        return {k: v.detach().float().cpu().clone() for k, v in params.items()}

    def save_checkpoint(self, directory: str, tag: Optional[str] = None) -> None:
        """DeepSpeed's sharded checkpoint (optimizer included), for resume."""
        self.engine.save_checkpoint(directory, tag=tag)

    def load_checkpoint(self, directory: str, tag: Optional[str] = None) -> None:
        self.engine.load_checkpoint(directory, tag=tag)

    def close(self) -> None:
        """Leave the process group (after a barrier). Without it a rank that reaches
        interpreter exit while gloo's threads still run can abort ("terminate called
        without an active exception", exit -6) after its work is done."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def wrap_model(model: Any, settings: DeepSpeedSettings, *, optimizer: Any = None) -> DistributedEngine:
    """``deepspeed.initialize`` with a torch AdamW (unless ``optimizer`` is given).

    Joins the process group first if needed (see :func:`init_distributed`)."""

    rank, world = init_distributed(settings.accelerator)
    ds = import_deepspeed(settings.accelerator)
    if settings.gradient_checkpointing and hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable()
    if optimizer is None:
        optimizer = make_optimizer(model, settings)
    config = build_ds_config(settings, world)
    engine, _, _, _ = ds.initialize(model=model, optimizer=optimizer, config=config)
    return DistributedEngine(engine=engine, settings=settings, rank=rank, world_size=world)


def make_optimizer(model: Any, settings: DeepSpeedSettings) -> Any:
    """The torch optimizer the settings describe (also used for single-process runs,
    so that both paths apply the very same update rule)."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    if settings.optimizer == "sgd":
        return torch.optim.SGD(params, lr=settings.lr, weight_decay=settings.weight_decay)
    return adamw(params, lr=settings.lr, betas=settings.betas, eps=settings.eps, weight_decay=settings.weight_decay,
                 fused=_on_cuda(settings.accelerator) and not settings.offload_optimizer)


def adamw(params: Any, *, lr: float, weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
          eps: float = 1e-8, fused: bool = False) -> Any:
    """torch AdamW; ``fused``: one CUDA kernel for the whole update instead of a chain of
    foreach kernels (what a tuned torch loop uses; the same rule). Off on the CPU, where the
    tests compare updates bit for bit with the default implementation. ``EVO_FUSED_ADAMW=0``
    turns it off (to measure the difference on a GPU)."""
    import torch

    fused = fused and os.environ.get("EVO_FUSED_ADAMW", "1") != "0"

    return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                             fused=True if fused else None)


def _on_cuda(accelerator: str) -> bool:
    if accelerator == "auto":
        import torch

        return bool(torch.cuda.is_available())
    return accelerator == "cuda"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_local(nprocs: int, argv: Sequence[str], *, env: Optional[Mapping[str, str]] = None,
                 timeout_s: float = 600.0, accelerator: str = "cpu") -> list[subprocess.CompletedProcess]:
    """Run ``python argv...`` as ``nprocs`` ranks on this machine (what the
    ``deepspeed`` launcher does, without its ssh/pdsh machinery). Raises if any rank fails."""
    if nprocs < 1:
        raise ValueError(f"nprocs must be >= 1, got {nprocs}")
    port = free_port()
    procs = []
    for rank in range(nprocs):
        penv = dict(os.environ)
        penv.update(env or {})
        penv.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_WORLD_SIZE=str(nprocs),
                    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), DS_ACCELERATOR=accelerator)
        procs.append(subprocess.Popen([sys.executable, *argv], env=penv, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    results = []
    try:
        for rank, p in enumerate(procs):
            out, _ = p.communicate(timeout=timeout_s)
            results.append(subprocess.CompletedProcess(p.args, p.returncode, out, ""))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    bad = [(i, r) for i, r in enumerate(results) if r.returncode != 0]
    if bad:
        i, r = bad[0]
        tail = "\n".join((r.stdout or "").splitlines()[-30:])
        raise RuntimeError(f"rank {i} of {nprocs} exited with {r.returncode}:\n{tail}")
    return results
