import pytest


@pytest.fixture
def pm():
    from evo_core.testing import isolated_plugins

    return isolated_plugins()
