"""Encrypt persona secrets at rest with Fernet (AES-128-CBC and HMAC-SHA256, cryptography).

The key is ``KEYS_DIR/persona.key`` (mode 0600), made on first use. Losing it loses the stored
personas' secrets, not the snapshots.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

KEY_NAME = "persona.key"


def _fernet() -> Fernet:
    """The Fernet of ``KEYS_DIR/persona.key``, made on first use; read once per key file (a
    file replaced at the same path, a new inode or time, is read again)."""
    path = Path(settings.KEYS_DIR) / KEY_NAME
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as stream:
            stream.write(Fernet.generate_key())
    found = path.stat()
    return _read_key(str(path), found.st_ino, found.st_mtime_ns)


@lru_cache(maxsize=8)
def _read_key(path: str, inode: int, modified_ns: int) -> Fernet:
    """Read the key file at ``path``; ``inode`` and ``modified_ns`` only key the cache."""
    return Fernet(Path(path).read_bytes().strip())


def encrypt(text: str) -> str:
    """Return ``text`` encrypted with the persona key, as a Fernet token (ASCII)."""
    return _fernet().encrypt(text.encode()).decode("ascii")


def decrypt(token: str) -> str:
    """Return what ``encrypt`` made ``token`` from; ValueError when the key does not open it."""
    try:
        return _fernet().decrypt(token.encode("ascii")).decode()
    except InvalidToken:
        raise ValueError(f"persona secrets cannot be decrypted with {KEY_NAME}") from None
