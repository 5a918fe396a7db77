"""EvoTrainer's minimal engine: store, state, plugins, loop, trainer, CLI."""

__version__ = "0.1.0"
