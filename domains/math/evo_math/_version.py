"""The distribution's version, in a module of its own so that submodules can read it
without importing the package's lazy top level."""

__version__ = "0.1.0"
