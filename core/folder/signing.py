"""Ed25519 signatures over snapshot manifests, so a snapshot can be checked without our database.

The archive holds one key pair in ``settings.KEYS_DIR`` (mode 0700): ``signing-key.pem`` (PKCS #8
PEM, mode 0600) and ``signing-key.pub.pem`` (SubjectPublicKeyInfo PEM, mode 0600 as every file
Vellum writes, a copy for people and other tools; Vellum always derives the public key from the
private one). Public keys of earlier pairs live in
``KEYS_DIR/retired/*.pub.pem`` and stay trusted for verifying older snapshots.

A snapshot's signature is ``manifest-sha256.txt.sig``: the raw 64-byte Ed25519 signature
(RFC 8032 §5.1.6) of the manifest's exact bytes. Anyone can check it with OpenSSL 3::

    openssl pkeyutl -verify -pubin -inkey signing-key.pub.pem -rawin \\
        -in manifest-sha256.txt -sigfile manifest-sha256.txt.sig
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from archive.privacy import DIR_MODE, restrict
from core.folder.manifest import MANIFEST_NAME, SIGNATURE_NAME, TEMP_PREFIX, atomic_write

PRIVATE_KEY_NAME = "signing-key.pem"
PUBLIC_KEY_NAME = "signing-key.pub.pem"
RETIRED_DIR = "retired"
SIGNATURE_BYTES = 64  # RFC 8032 §5.1.6: R (32 bytes) followed by S (32 bytes)

logger = logging.getLogger(__name__)


class SigningKeyError(Exception):
    """A key file is missing, unreadable, or not an Ed25519 key in PEM form (one readable line)."""


class SigningKeyMissingError(SigningKeyError):
    """There is no private key in KEYS_DIR yet (``manage.py init`` creates one)."""


def keys_dir() -> Path:
    """Return ``settings.KEYS_DIR`` as a Path, read at each call so tests may point it elsewhere."""
    return Path(settings.KEYS_DIR)


def ensure_signing_key() -> bool:
    """Create the key pair in KEYS_DIR if there is none; return True when this call created it.

    KEYS_DIR is made mode 0700 (and an existing private key 0600). A new private key is written
    whole to a temporary file (mode 0600 from creation, as ``mkstemp`` makes it) and published
    with ``os.link``, which fails if the name exists: when several processes race on a fresh
    DATA_DIR exactly one link succeeds, and nobody ever sees a half-written or group-readable key.
    The public key file is then (re)written from whichever private key won, so the two always
    belong to one pair.

    Raises SigningKeyError when KEYS_DIR cannot be made or written, or the key there is unusable.
    """
    folder = keys_dir()
    try:
        _make_private_folder(folder)
        created = not (folder / PRIVATE_KEY_NAME).exists() and _publish_private_key(folder)
    except OSError as error:
        raise SigningKeyError(f"cannot write the signing key in {folder}: {error}") from None
    _write_public_key(folder)
    return created


def _make_private_folder(folder: Path) -> None:
    """Create ``folder`` (and parents) if needed, mode 0700; raise OSError."""
    folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    # mkdir's mode is masked by the umask, and a folder made by hand may be looser; a key
    # restored from a backup or copied by hand may have lost its mode. The public key and the
    # retired ones are public, but what lies in DATA_DIR is its user's alone.
    for path in (folder, folder / PRIVATE_KEY_NAME, folder / PUBLIC_KEY_NAME, folder / RETIRED_DIR):
        _restrict_to_owner(path)


def _restrict_to_owner(path: Path) -> None:
    """Take group and others' access off ``path`` (archive/privacy.py's ``restrict``).

    Logs a warning instead of failing when it cannot: keys may sit on a read-only mount that
    the operator set up, and signing must not stop over that.
    """
    try:
        restrict(path)
    except OSError as error:
        logger.warning("%s is open to other users and cannot be restricted: %s", path, error)


def _publish_private_key(folder: Path) -> bool:
    """Link a new private key into place; return False when another process got there first."""
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd, temp_name = tempfile.mkstemp(prefix=TEMP_PREFIX + "signing-key-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp_name, folder / PRIVATE_KEY_NAME)
        except FileExistsError:
            return False
    finally:
        Path(temp_name).unlink(missing_ok=True)
    _fsync_folder(folder)
    return True


def _write_public_key(folder: Path) -> None:
    """Write the public key of the current private key next to it, unless it is already there."""
    pem = public_key_pem().encode()
    path = folder / PUBLIC_KEY_NAME
    try:
        if path.is_file() and path.read_bytes() == pem:
            return
        atomic_write(path, pem)
    except OSError as error:
        raise SigningKeyError(f"cannot write {path}: {error}") from None


def _fsync_folder(folder: Path) -> None:
    """Make a new name in ``folder`` survive a crash (POSIX needs the directory synced too)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_private_key() -> Ed25519PrivateKey:
    """Return the archive's private key from ``KEYS_DIR/signing-key.pem``.

    Raises SigningKeyMissingError when there is none, SigningKeyError when it cannot be read or
    is not an unencrypted Ed25519 private key in PEM form.
    """
    path = keys_dir() / PRIVATE_KEY_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SigningKeyMissingError(f"no signing key at {path} (run manage.py init)") from None
    except OSError as error:
        raise SigningKeyError(f"cannot read signing key {path}: {error.strerror}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise SigningKeyError(f"{path} is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path} is not an Ed25519 key")
    return key


def public_key_pem() -> str:
    """Return the current public key as SubjectPublicKeyInfo PEM text (derived from the private
    key); raise SigningKeyError (SigningKeyMissingError when there is no key yet)."""
    public = load_private_key().public_key()
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def _load_public_key(public_pem: str, source: str = "public key") -> Ed25519PublicKey:
    """Parse an Ed25519 SubjectPublicKeyInfo PEM; raise SigningKeyError naming ``source``."""
    try:
        key = serialization.load_pem_public_key(public_pem.encode())
    except (ValueError, TypeError, UnsupportedAlgorithm, UnicodeEncodeError):
        raise SigningKeyError(f"{source} is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningKeyError(f"{source} is not an Ed25519 key")
    return key


def key_fingerprint(public_pem: str) -> str:
    """Return ``"sha256:<hex>"``, the SHA-256 of the raw 32-byte public key in ``public_pem``.

    Raises SigningKeyError when ``public_pem`` is not an Ed25519 public key in PEM form.
    """
    return _fingerprint(_load_public_key(public_pem))


def _fingerprint(key: Ed25519PublicKey) -> str:
    """Return ``"sha256:<hex>"`` of the key's raw 32 bytes (RFC 8032 §5.1.5 encoding)."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def sign_manifest(folder: Path) -> str:
    """Sign ``folder/manifest-sha256.txt`` into ``folder/manifest-sha256.txt.sig``; return the
    signing key's fingerprint.

    The signature is the raw 64-byte Ed25519 signature of the manifest's bytes, written
    atomically. Ed25519 is deterministic, so signing an unchanged manifest again writes the same
    bytes. Creates the key pair first if there is none. Raises SigningKeyError for an unusable
    key and OSError when the manifest cannot be read or the signature written.
    """
    ensure_signing_key()
    key = load_private_key()
    signature = key.sign((folder / MANIFEST_NAME).read_bytes())
    atomic_write(folder / SIGNATURE_NAME, signature)
    return _fingerprint(key.public_key())


def trusted_public_keys() -> dict[str, str]:
    """Return ``{fingerprint: PEM}`` for the current key (first) and every retired one.

    An archive with no key yet gives only its retired keys, possibly none. Raises SigningKeyError
    when the current key or a file in ``KEYS_DIR/retired/`` is unreadable or not an Ed25519 key.
    """
    keys = {}
    try:
        current = public_key_pem()
    except SigningKeyMissingError:
        pass
    else:
        keys[key_fingerprint(current)] = current
    for path in sorted((keys_dir() / RETIRED_DIR).glob("*.pub.pem")):
        try:
            pem = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as error:
            raise SigningKeyError(f"cannot read retired key {path}: {error}") from None
        keys.setdefault(_fingerprint(_load_public_key(pem, source=str(path))), pem)
    return keys


def verify_signature(folder: Path, public_pem: str | None = None) -> list[str]:
    """Return the problems with ``folder``'s manifest signature ([] when it is good).

    With ``public_pem``, check against that key and also report it when the archive does not
    trust it; without, accept a signature that any trusted key verifies. A missing, truncated or
    wrong signature is a problem, never an exception; raises SigningKeyError only when a key is
    unusable.
    """
    signature_path = folder / SIGNATURE_NAME
    try:
        signature = signature_path.read_bytes()
    except FileNotFoundError:
        return [f"signature missing: {SIGNATURE_NAME}"]
    except OSError as error:
        return [f"signature unreadable: {SIGNATURE_NAME} ({error.strerror})"]
    if len(signature) != SIGNATURE_BYTES:
        return [f"signature is {len(signature)} bytes, not {SIGNATURE_BYTES}: {SIGNATURE_NAME}"]
    try:
        manifest = (folder / MANIFEST_NAME).read_bytes()
    except OSError:
        return [f"manifest missing: {MANIFEST_NAME}"]
    if public_pem is not None:
        return _verify_with(public_pem, signature, manifest)
    trusted = trusted_public_keys()
    if not trusted:
        return [f"no trusted public key to check {SIGNATURE_NAME} with"]
    if any(_verifies(pem, signature, manifest) for pem in trusted.values()):
        return []
    return [f"signature does not match {MANIFEST_NAME} (tried {len(trusted)} trusted keys)"]


def _verify_with(public_pem: str, signature: bytes, manifest: bytes) -> list[str]:
    """Check ``signature`` with one given key, then whether the archive trusts that key."""
    fingerprint = key_fingerprint(public_pem)
    if not _verifies(public_pem, signature, manifest):
        return [f"signature does not match {MANIFEST_NAME}"]
    if fingerprint not in trusted_public_keys():
        return [f"signed by a key this archive does not trust ({fingerprint})"]
    return []


def _verifies(public_pem: str, signature: bytes, manifest: bytes) -> bool:
    """Return whether ``signature`` is ``public_pem``'s Ed25519 signature of ``manifest``."""
    try:
        _load_public_key(public_pem).verify(signature, manifest)
    except InvalidSignature:
        return False
    return True
