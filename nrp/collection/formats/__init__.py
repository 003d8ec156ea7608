"""Registry of input formats: each format module declares its formats with ``register(...)``.

nrp's own format modules are named in ``BUILTIN_MODULES`` and imported on the first listing;
another package adds formats by naming its module under the entry-point group ``nrp.formats``
(docs/extending.md), so a manifest can use them like the built-in ones.
"""

from __future__ import annotations

from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.records import with_nfc_ids
from nrp.components import Registry
from nrp.errors import ConfigError, quote

__all__ = [
    "Format",
    "Option",
    "ReadReport",
    "all_formats",
    "get_format",
    "read_format",
    "register",
    "unregister",
]

#: nrp's own format modules (no package scan)
BUILTIN_MODULES = tuple(
    f"{__name__}.{module}"
    for module in (
        "argquality",
        "cranfield",
        "html_folder",
        "irds",
        "liveqa_med",
        "mediqa",
        "table",
        "trec_qrels",
        "trec_topics",
        "warc",
    )
)
ENTRY_POINT_GROUP = "nrp.formats"

FORMAT_REGISTRY: Registry[Format] = Registry(
    "input format", Format, BUILTIN_MODULES, ENTRY_POINT_GROUP
)


def register(*formats: Format) -> None:
    """Declare input formats: ``nrp formats`` lists them and manifests may name them."""
    for fmt in formats:
        FORMAT_REGISTRY.register(fmt)


def unregister(name: str) -> Format:
    """Remove a format's declaration (a notebook redefining it, a test's own format)."""
    return FORMAT_REGISTRY.unregister(name)


def all_formats() -> dict[str, Format]:
    """Every declared input format by name, sorted (built-ins and installed plug-ins)."""
    return FORMAT_REGISTRY.entries()


def get_format(name: str) -> Format:
    formats = all_formats()
    if name not in formats:
        raise ConfigError(f"unknown input format {quote(name)}; known: {', '.join(formats)}")
    return formats[name]


def read_format(name: str, path, **options) -> tuple[list, ReadReport]:
    """Read one input the way ingest does, without a manifest: the format's declared defaults,
    then ``options``; the records (ids in NFC, as ingest stores them) and the reader's report."""
    fmt = get_format(name)
    report = ReadReport()
    full = {key: option.default for key, option in fmt.options.items()} | options
    return [with_nfc_ids(record) for record in fmt.read(path, full, report)], report
