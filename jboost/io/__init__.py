"""Model files: :func:`save` and :func:`load` for every fitted model type, versioned, checked, with
no pickle and no code executed on load. See docs/io.md.
"""

from jboost.io.loader import load
from jboost.io.reader import (FORMAT, FORMAT_VERSION, HEADER, ModelFileError, checksum,
                              predict_numpy, read, read_header)
from jboost.io.writer import save
