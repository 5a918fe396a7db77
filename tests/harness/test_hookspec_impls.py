"""One implementation test per hookspec: a plugin implementing the hook is collected or called.

The harness hooks are exercised in depth elsewhere (test_interventions, test_engine); here
each hook gets a minimal third-party-style plugin so that a broken spec or manager shows up.
The trainer hooks are gone: a plugin that implements one gets a clear error (the last test)."""

from typing import Any

import attrs

from evo_core.hookspecs import hookimpl
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
    pm.on_events("r", [Thing(run_id="r", x=1)])
    assert ("events", "r", 1) in p.seen


def test_the_facade_uses_pluggys_own_calling(evo_plugins, evo_plugin):
    """Hook wrappers and tryfirst/trylast work, and one raising implementation is isolated."""
    order = []

    class First:
        @hookimpl(tryfirst=True)
        def evo_register_gates(self):
            order.append("first")
            return [_Named("first_gate")]

    class Broken:
        @hookimpl
        def evo_register_gates(self):
            raise RuntimeError("boom")

    class Wrapper:
        @hookimpl(wrapper=True)
        def evo_register_gates(self):
            order.append("wrapper-in")
            out = yield
            order.append("wrapper-out")
            return out + [[_Named("wrapped_gate")]]

    pm = evo_plugin(Broken(), name="broken")
    evo_plugin(First(), name="first")
    evo_plugin(Wrapper(), name="wrapper")
    with pm.capture_failures() as failures:
        names = list(pm.gates())
    assert names[0] == "first_gate" and names[-1] == "wrapped_gate" and order == ["wrapper-in", "first", "wrapper-out"]
    assert [f.plugin for f in failures] == ["broken"] and failures[0].error_type == "RuntimeError"
    from evo_core.plugins import RequiredPluginFailed

    with pm.requiring(["broken"]):
        import pytest

        with pytest.raises(RequiredPluginFailed, match="boom"):
            pm.gates()


def test_a_removed_trainer_hook_is_a_clear_error_not_a_silent_no_op():
    """The five trainer hooks are gone (one way to change training: interventions). pluggy
    reports an implementation of an unknown hook at ``check_pending``; the message for a
    removed one says what to do instead."""
    import pytest

    from evo_core import hookspecs
    from evo_core.plugins import PluginError, PluginManager

    assert set(hookspecs.REMOVED_HOOKS) == {"evo_task_weights", "evo_prompt_hint", "evo_hyperparameters",
                                            "evo_transform_rewards", "evo_filter_rollouts"}
    for name in hookspecs.REMOVED_HOOKS:
        assert not hasattr(hookspecs, name)  # no spec: nothing would ever call it
        msg = hookspecs.removed_hook_message(name, "old_plugin")
        assert msg.startswith(f"plugin 'old_plugin' implements {name}") and "use an intervention" in msg
        assert "\n" not in msg
    assert "new_reward" in hookspecs.removed_hook_message("evo_transform_rewards")
    assert "mask(" in hookspecs.removed_hook_message("evo_filter_rollouts")
    with pytest.raises(KeyError):
        hookspecs.removed_hook_message("evo_no_such_hook")

    class Old:
        @hookimpl
        def evo_transform_rewards(self, batch, state):
            pass

        @hookimpl
        def evo_register_gates(self):
            return []

    assert hookspecs.removed_hooks_of(Old()) == ["evo_transform_rewards"]
    assert hookspecs.removed_hooks_of(Everything()) == []
    pm = PluginManager(load_entrypoints=False)
    with pytest.raises(PluginError, match="evo_transform_rewards.*removed: use an intervention"):
        pm.register(Old(), name="old")  # refused at load, with the migration line
