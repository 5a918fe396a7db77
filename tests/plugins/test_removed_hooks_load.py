"""A plugin that still implements a removed trainer hook is refused at load with the migration line."""
import pytest

from evo_core import hookspecs
from evo_core.plugins import PluginError, PluginManager


def test_a_removed_hook_is_refused_with_its_migration_message():
    name = sorted(hookspecs.REMOVED_HOOKS)[0]

    class Old:
        pass

    def impl(*args, **kwargs):
        return None

    setattr(Old, name, staticmethod(hookspecs.hookimpl(impl)))
    pm = PluginManager(load_entrypoints=False) if "load_entrypoints" in PluginManager.__init__.__code__.co_varnames else PluginManager()
    with pytest.raises(PluginError, match="removed"):
        pm.register(Old(), name="old-plugin")
