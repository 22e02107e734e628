"""Model files: :func:`save` and :func:`load` for every fitted model type, versioned, checked, with
no pickle and no code executed on load. See docs/io.md.
"""

from jboost.io.loader import load
from jboost.io.reader import FORMAT
from jboost.io.reader import FORMAT_VERSION
from jboost.io.reader import HEADER
from jboost.io.reader import ModelFileError
from jboost.io.reader import checksum
from jboost.io.reader import predict_numpy
from jboost.io.reader import read
from jboost.io.reader import read_header
from jboost.io.writer import save
