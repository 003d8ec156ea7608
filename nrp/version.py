"""The version of nrp, in the lowest layer so that any module can stamp it on what it writes."""

__version__ = "0.1.0"
