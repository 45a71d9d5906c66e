"""Where the public data shared with the project lies (``../shared/data`` beside the
repository) and a reader for its CSV files."""

from __future__ import annotations

import csv
from pathlib import Path

#: The shared data folder: ``<repository>/../shared/data``.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

#: The one line a test needing the public data skips with: where it looked, how to get it.
NO_DATA = (f"public data not found at {SHARED_DATA}: put the team's shared/ folder beside the "
           f"checkout (its data/ holds lattuada2022, sia2023, gavel2020, lambda2025)")


def csv_rows(path: Path) -> int:
    """The number of data rows of a CSV file (its header not counted)."""
    with path.open(newline="") as file:
        return sum(1 for _ in csv.reader(file)) - 1
