"""``--log-format json``: library logs (stdlib ``logging``, ``warnings``, DeepSpeed's own
``[WARNING]`` logger that writes to stdout) come out as JSON lines on stderr too."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

SCRIPT = """
import logging, sys, warnings
from evo_core.logformat import configure
early = logging.getLogger("made_before")  # a library logger that exists before configure()
early.propagate = False
early.addHandler(logging.StreamHandler(sys.stdout))
configure(fmt="json")
# what DeepSpeed's LoggerFactory does at import: its own stdout handler, no propagation
lib = logging.getLogger("DeepSpeedLike")
lib.setLevel(logging.WARNING)
lib.propagate = False
h = logging.StreamHandler(stream=sys.stdout)
h.setFormatter(logging.Formatter("[%(asctime)s] [%(levelname)s] %(message)s"))
lib.addHandler(h)
lib.warning("Setting accelerator to CPU.")
lib.info("not shown: below the library's level")
early.error("from before")
import structlog
structlog.get_logger("evo").warning("ours", k=1)
warnings.warn("a library warning")
if sys.argv[1] == "deepspeed":
    from deepspeed.accelerator import get_accelerator
    get_accelerator()
configure(fmt="console")  # back to text: the root's JSON handler is gone again
logging.getLogger("after").warning("plain again")
"""


@pytest.mark.parametrize("with_ds", [False, pytest.param(True, marks=pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed"))])
def test_library_logs_are_json_on_stderr(with_ds):
    r = subprocess.run([sys.executable, "-c", SCRIPT, "deepspeed" if with_ds else "-"], capture_output=True,
                       text=True, timeout=300, env={"PATH": "", "EVO_LOG_LEVEL": "INFO", "PYTHONWARNINGS": "default"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == ""  # stdout carries a command's output only
    lines = r.stderr.splitlines()
    plain = [x for x in lines if not x.startswith("{")]
    assert plain == ["plain again"], lines  # after configure(console) stdlib logging is the library default again
    rows = [json.loads(x) for x in lines if x.startswith("{")]
    events = {(x.get("logger"), x["level"]): x["event"] for x in rows}
    assert events[("DeepSpeedLike", "warning")] == "Setting accelerator to CPU."
    assert events[("made_before", "error")] == "from before"
    assert events[("py.warnings", "warning")].strip().endswith("UserWarning: a library warning")
    assert any(x["event"] == "ours" and x["k"] == 1 for x in rows)
    assert not any("not shown" in x["event"] for x in rows)
    if with_ds:
        assert any(x.get("logger") == "DeepSpeed" and "accelerator" in x["event"] for x in rows), rows
    assert all("timestamp" in x for x in rows)
