"""Write a file the package ships, or check that a rebuild gives its bytes (``--check``).

The scripts that rebuild shipped files from the public data (``build_evidence.py``,
``gpu_transfer_params.py``, ``batch_elasticity.py``) end the same way: compare the rebuilt
text with the file in the package and exit 1 where it differs, or write it.
"""

from __future__ import annotations

import sys
from pathlib import Path


def check_or_write(path: Path, text: str, check: bool, root: Path, note: str = "") -> None:
    """With ``check``, exit 0 if ``path`` holds ``text`` byte for byte, else 1 (saying
    which); otherwise write ``text`` to ``path`` and say so (``note`` after the path)."""
    if check:
        same = path.exists() and path.read_text() == text
        print("same as the shipped file" if same else "differs from the shipped file")
        sys.exit(0 if same else 1)
    path.write_text(text)
    print(f"wrote {path.relative_to(root)}{note}")
