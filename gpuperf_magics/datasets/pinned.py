"""A public dataset pinned to one commit of its repository: where each file is, what its
bytes hash to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PinnedDataset:
    """A public dataset pinned to one commit of its GitHub repository, with the SHA-256 of
    each of its files."""

    name: str
    repository: str  # GitHub owner/name
    commit: str
    folder: str  # folder of the files inside the repository
    files: dict[str, str]  # path below ``folder`` -> SHA-256 of its bytes

    def url(self, path: str) -> str:
        return (
            f"https://raw.githubusercontent.com/{self.repository}/{self.commit}/"
            f"{self.folder}/{path}"
        )
