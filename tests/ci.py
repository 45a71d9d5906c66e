"""Whether the tests run under CI, where a missing system program (PostgreSQL, Chromium)
fails the tests that need it instead of skipping them."""

from __future__ import annotations

import os


def in_ci() -> bool:
    """True when ``$CI`` says so (``true``, ``1`` or ``yes``), as CI services set it."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
