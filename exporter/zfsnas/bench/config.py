"""The benchmark configuration, as the bench wing names it: `zfsnas.sources.benchconfig` defines it
once (below the bench wing, so the exporter's reader needs nothing from here); this module only
re-exports it for the runner's modules and the tools that import `zfsnas.bench.config`."""

from ..sources.benchconfig import (
    ID_LENGTH,
    IDENTITY_PARAMETERS,
    LABELS,
    UNKNOWN,
    Configuration,
    Pairs,
    differences,
    differs_text,
    leaf_paths,
    legacy_configuration,
    look_alikes,
    measured_properties,
    pairs,
    pool_layout,
)

__all__ = ["ID_LENGTH", "IDENTITY_PARAMETERS", "LABELS", "UNKNOWN", "Configuration", "Pairs", "differences",
           "differs_text", "leaf_paths", "legacy_configuration", "look_alikes", "measured_properties", "pairs",
           "pool_layout"]
