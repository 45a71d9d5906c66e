"""The built-in GPU spec sheet as plain rows, for the tests that check every GPU in it."""

from __future__ import annotations

from gpuperf_magics.hardware import catalog


def gpu_rows() -> list[dict]:
    """Every GPU of the catalog (``catalog.gpus()``) as one dict per row."""
    return catalog.gpus().to_dict("records")
