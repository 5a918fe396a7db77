"""``evo serve``: an OpenAI-compatible server around the in-process policy, so the HTTP
rollout path can be tested on a CPU and then pointed, unchanged, at vLLM or SGLang."""

from evo_core.serve.app import build_app
from evo_core.serve.host import HostError, ModelHost
from evo_core.serve.runner import PolicySpecError, ServerThread, load_policy, make_host, run_server

__all__ = ["build_app", "HostError", "ModelHost", "PolicySpecError", "ServerThread", "load_policy", "make_host",
           "run_server"]
