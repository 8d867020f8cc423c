"""The Cvec wrapper: a value the adapters always send as ``cvec``."""

import numpy as np

from ._codec import as_float32


class Cvec:
    """A float32 vector that the adapters send as ``cvec`` whatever else is
    registered for ``numpy.ndarray`` (pgvector's adapters, for instance).

    ``Cvec([1, 2, 3])``; ``.array`` (or ``.to_numpy()``) is the float32 ndarray.
    Query results are plain ndarrays, never Cvec.
    """

    __slots__ = ("array",)

    def __init__(self, values):
        self.array = as_float32(values)

    def to_numpy(self):
        return self.array

    def __len__(self):
        return self.array.size

    def __eq__(self, other):
        if not isinstance(other, Cvec):
            return NotImplemented
        return np.array_equal(self.array.view(np.uint32), other.array.view(np.uint32))

    __hash__ = None

    def __repr__(self):
        return "Cvec(%s)" % np.array2string(self.array, threshold=8, separator=", ")
