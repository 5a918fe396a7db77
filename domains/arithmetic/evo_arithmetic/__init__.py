"""The arithmetic domain: generated integer addition (``37+45=``), a strict oracle, and a
catalogue of documented reward flaws that an SFT warm start can plant (see ``flaws``)."""

__version__ = "0.2.0"
