"""One implementation test per hookspec: a plugin implementing the hook is collected or called.

The harness hooks are exercised in depth elsewhere (test_interventions, test_engine); here
each hook gets a minimal third-party-style plugin so that a broken spec or manager shows up."""

from typing import Any

import attrs

from evo_core.api import Completion, RolloutBatch, RolloutItem, Task, Verdict
from evo_core.hookspecs import hookimpl
from evo_core.state import HarnessState
from evo_events import Event, event_type


@event_type("hooktest.Thing", version=1)
@attrs.frozen(kw_only=True)
class Thing(Event):
    x: int = 0


class _Named:
    def __init__(self, name):
        self.name, self.version = name, "1"


class Everything:
    def __init__(self):
        self.seen: list[tuple[str, Any]] = []

    @hookimpl
    def evo_register_event_types(self):
        return [Thing]

    @hookimpl
    def evo_register_domains(self):
        return [_Named("hooktest_domain")]

    @hookimpl
    def evo_register_diagnostics(self):
        return [_Named("hooktest_diag")]

    @hookimpl
    def evo_register_interventions(self):
        return [_Named("hooktest_iv")]

    @hookimpl
    def evo_register_proposers(self):
        return [_Named("hooktest_prop")]

    @hookimpl
    def evo_register_backtesters(self):
        return [_Named("hooktest_bt")]

    @hookimpl
    def evo_register_gates(self):
        return [_Named("hooktest_gate")]

    @hookimpl
    def evo_register_sinks(self, config):
        return [_Named(f"sink:{config.get('x')}")]

    @hookimpl
    def evo_sink_names(self):
        return ["hooktest_sink"]

    @hookimpl
    def evo_register_commands(self, app):
        self.seen.append(("commands", app))

    @hookimpl
    def evo_task_weights(self, tasks, state, step):
        return {tasks[0].task_id: 0.5}

    @hookimpl
    def evo_prompt_hint(self, task, state):
        return f"hint for {task.task_id}"

    @hookimpl
    def evo_hyperparameters(self, params, state, step):
        return {"temperature": params["temperature"] + step}

    @hookimpl
    def evo_transform_rewards(self, batch, state):
        for it in batch.items:
            if it.reward is not None:
                it.reward *= 0.5

    @hookimpl
    def evo_filter_rollouts(self, batch, state):
        batch.items[0].mask = False

    @hookimpl
    def evo_on_events(self, run_id, events):
        self.seen.append(("events", run_id, len(events)))


def test_every_hook_is_collected_or_called(evo_plugins, evo_plugin):
    p = Everything()
    pm = evo_plugin(p, name="hooktest")
    from evo_events.base import event_class

    assert event_class("hooktest.Thing") is Thing
    assert "hooktest_domain" in pm.domains() and "hooktest_diag" in pm.diagnostics()
    assert "hooktest_iv" in pm.interventions() and "hooktest_prop" in pm.proposers()
    assert "hooktest_bt" in pm.backtesters() and "hooktest_gate" in pm.gates()
    assert any(s.name == "sink:7" for s in pm.sinks({"x": 7}))
    assert "hooktest_sink" in pm.sink_names()
    pm.register_commands("APP")
    assert ("commands", "APP") in p.seen
    s, t = HarnessState(), Task(task_id="a", prompt="")
    assert {"a": 0.5} in pm.task_weights([t], s, 1)
    assert "hint for a" in pm.prompt_hints(t, s)
    assert {"temperature": 3.0} in pm.hyperparameters({"temperature": 1.0}, s, 2)
    items = [RolloutItem(rollout_id=str(i), group_id="g", task=t, completion=Completion(text=""),
                         verdict=Verdict(reward=1.0, correct=True), reward=1.0) for i in range(2)]
    batch = RolloutBatch(step=1, items=items)
    pm.transform_rewards(batch, s)
    pm.filter_rollouts(batch, s)
    assert [i.reward for i in items] == [0.5, 0.5] and [i.mask for i in items] == [False, True]
    pm.on_events("r", [Thing(run_id="r", x=1)])
    assert ("events", "r", 1) in p.seen


def test_the_facade_uses_pluggys_own_calling(evo_plugins, evo_plugin):
    """Hook wrappers and tryfirst/trylast work, and one raising implementation is isolated."""
    order = []

    class First:
        @hookimpl(tryfirst=True)
        def evo_prompt_hint(self, task, state):
            order.append("first")
            return "first"

    class Broken:
        @hookimpl
        def evo_prompt_hint(self, task, state):
            raise RuntimeError("boom")

    class Wrapper:
        @hookimpl(wrapper=True)
        def evo_prompt_hint(self, task, state):
            order.append("wrapper-in")
            out = yield
            order.append("wrapper-out")
            return out + ["wrapped"]

    pm = evo_plugin(Broken(), name="broken")
    evo_plugin(First(), name="first")
    evo_plugin(Wrapper(), name="wrapper")
    with pm.capture_failures() as failures:
        hints = pm.prompt_hints(Task(task_id="a", prompt=""), HarnessState())
    assert hints[0] == "first" and hints[-1] == "wrapped" and order == ["wrapper-in", "first", "wrapper-out"]
    assert [f.plugin for f in failures] == ["broken"] and failures[0].error_type == "RuntimeError"
    from evo_core.plugins import RequiredPluginFailed

    with pm.requiring(["broken"]):
        import pytest

        with pytest.raises(RequiredPluginFailed, match="boom"):
            pm.prompt_hints(Task(task_id="a", prompt=""), HarnessState())
