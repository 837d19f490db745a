"""What every reader returns, and what every reader says when a library fails on a file."""

import re
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Volume:
    """An array with its geometry in array axis order; geometry fields may be unknown (None)."""

    array: np.ndarray
    spacing: tuple[float, ...] | None = None
    origin: tuple[float, ...] | None = None
    direction: tuple[float, ...] | None = None  # row-major matrix, flattened
    attrs: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.array = native(self.array)


def native(array: np.ndarray) -> np.ndarray:
    """``array`` in the machine's byte order: big-endian files are legitimate, but compiled
    kernels (cc3d, numba) accept native arrays only."""
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def reason(exc: Exception) -> str:
    """A reading library's own explanation of a failure, for a participant: without ITK's
    source paths and object addresses, absolute paths shortened to file names."""
    text = str(exc)
    if "ITK ERROR" in text:
        text = re.sub(r"^.*ITK ERROR: \w+\(0x[0-9a-f]+\):\s*", "", text, flags=re.S).strip()
        text = re.sub(r"\s*Reason: .*$", "", text, flags=re.S)  # errno of an unrelated call
    text = re.sub(r"/(?:[^\s/:]+/)+([^\s/:]+)", r"\1", text)  # absolute paths -> file names
    return f"{type(exc).__name__}: {' '.join(text.split())}"
