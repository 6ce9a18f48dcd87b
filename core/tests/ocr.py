"""Read the text of an image with Tesseract, so that tests can check what a page showed from
its pixels (a screenshot, a replay) rather than from its markup.

The ``tesseract`` command (apt package tesseract-ocr, installed by .ci/install) reads the PNG
with its defaults: English, automatic page segmentation. It reads a line of large text in a
full-page screenshot (1280 x 6500 px, mostly blank) as well as in a viewport's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

TESSERACT = "tesseract"
TIMEOUT_SECONDS = 120
# One thread: Tesseract's OpenMP threads only slow it down on a machine already busy (its
# documentation's advice when several run at once).
THREADS = {"OMP_THREAD_LIMIT": "1"}
# What Tesseract may read for a hyphen (the dashes and minus sign of Unicode), and the space it
# may see on either side of one.
DASH = re.compile(r"\s*[-\u2010-\u2015\u2212]\s*")


def tesseract_available() -> bool:
    """True when the ``tesseract`` command is on PATH."""
    return shutil.which(TESSERACT) is not None


def text_in_image(path: Path) -> str:
    """Return the text Tesseract reads in the image at ``path`` (PNG), upper-cased, each dash
    made a hyphen without space around it, each other run of whitespace made one space.

    Raises FileNotFoundError without the ``tesseract`` command, subprocess.CalledProcessError
    when it fails, subprocess.TimeoutExpired past TIMEOUT_SECONDS.
    """
    done = subprocess.run(
        [TESSERACT, str(path), "stdout"],
        capture_output=True,
        check=True,
        env={**os.environ, **THREADS},
        timeout=TIMEOUT_SECONDS,
        text=True,
    )
    return " ".join(DASH.sub("-", done.stdout).upper().split())
