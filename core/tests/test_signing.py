"""Manifest signatures (core/folder/signing.py): the key pair, signing, verifying, and who can check
them.

Keys live in a fresh KEYS_DIR under ``tmp_path`` for every test. Concurrent key creation is
checked with real processes racing on one fresh folder; the signature format is checked with the
real ``openssl`` binary, as someone verifying a snapshot without Vellum would.
"""

from __future__ import annotations

import base64
import hashlib
import io
import multiprocessing
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from core.folder import signing
from core.folder.index_json import write_index
from core.folder.manifest import MANIFEST_NAME, SIGNATURE_NAME, write_manifest

OPENSSL = shutil.which("openssl")


@pytest.fixture
def keys(settings, tmp_path: Path) -> Path:
    """Point KEYS_DIR at a folder that does not exist yet (as on a fresh DATA_DIR)."""
    settings.KEYS_DIR = tmp_path / "data" / "keys"
    return settings.KEYS_DIR


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A snapshot folder with an index, two payload files and their manifest."""
    snapshot = tmp_path / "data" / "archive" / "0195d2a0-0000-7000-8000-000000000001"
    (snapshot / "title").mkdir(parents=True)
    (snapshot / "title" / "title.txt").write_text("Archived\n")
    (snapshot / "headers.json").write_text('{"status": 200}\n')
    write_index(snapshot, {"url": "http://a.example/"})
    write_manifest(snapshot)
    return snapshot


def other_key_pem() -> tuple[Ed25519PrivateKey, str]:
    """A freshly generated key pair that is not the archive's: (private key, public PEM)."""
    key = Ed25519PrivateKey.generate()
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return key, pem.decode()


def sign_with(key: Ed25519PrivateKey, folder: Path) -> None:
    """Sign ``folder``'s manifest with ``key`` as an earlier (or foreign) archive would have."""
    (folder / SIGNATURE_NAME).write_bytes(key.sign((folder / MANIFEST_NAME).read_bytes()))


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- the key pair --------------------------------------------------------------------------------


def test_ensure_creates_a_private_key_pair_whatever_the_umask(keys: Path) -> None:
    old_umask = os.umask(0)  # the most permissive umask: modes must not depend on it
    try:
        created = signing.ensure_signing_key()
    finally:
        os.umask(old_umask)

    assert created is True
    assert mode(keys) == 0o700
    private = keys / signing.PRIVATE_KEY_NAME
    assert mode(private) == 0o600
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----\n")  # PKCS #8
    public = (keys / signing.PUBLIC_KEY_NAME).read_text()
    assert public.startswith("-----BEGIN PUBLIC KEY-----\n")  # SubjectPublicKeyInfo
    assert public == signing.public_key_pem()
    assert sorted(p.name for p in keys.iterdir()) == [
        signing.PRIVATE_KEY_NAME,
        signing.PUBLIC_KEY_NAME,
    ]


def test_private_key_is_whole_and_0600_before_it_has_its_name(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = []
    real_link = os.link

    def spying_link(source, target, *args, **kwargs):
        seen.append((mode(Path(source)), Path(source).read_bytes()))
        return real_link(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "link", spying_link)
    signing.ensure_signing_key()

    assert len(seen) == 1
    source_mode, source_bytes = seen[0]
    assert source_mode == 0o600
    assert source_bytes == (keys / signing.PRIVATE_KEY_NAME).read_bytes()
    assert not [p.name for p in keys.iterdir() if p.name.startswith(".tmp-")]


def test_ensure_is_idempotent(keys: Path) -> None:
    assert signing.ensure_signing_key() is True
    private = (keys / signing.PRIVATE_KEY_NAME).read_bytes()
    public = (keys / signing.PUBLIC_KEY_NAME).read_bytes()

    assert signing.ensure_signing_key() is False
    assert signing.ensure_signing_key() is False

    assert (keys / signing.PRIVATE_KEY_NAME).read_bytes() == private
    assert (keys / signing.PUBLIC_KEY_NAME).read_bytes() == public


def test_ensure_tightens_a_keys_folder_and_key_copied_by_hand(keys: Path) -> None:
    signing.ensure_signing_key()
    os.chmod(keys, 0o755)
    os.chmod(keys / signing.PRIVATE_KEY_NAME, 0o644)

    assert signing.ensure_signing_key() is False

    assert mode(keys) == 0o700
    assert mode(keys / signing.PRIVATE_KEY_NAME) == 0o600


def test_a_key_folder_that_cannot_be_restricted_is_a_warning(
    keys: Path, folder: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    signing.ensure_signing_key()
    os.chmod(keys, 0o755)

    real_chmod = os.chmod

    def read_only_chmod(path, mode, *args, **kwargs):
        if Path(path).is_relative_to(keys):  # KEYS_DIR is on a read-only mount, the archive not
            raise PermissionError(30, "Read-only file system", str(path))
        return real_chmod(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "chmod", read_only_chmod)

    assert signing.sign_manifest(folder).startswith("sha256:")
    assert "is open to other users and cannot be restricted" in caplog.text
    assert signing.verify_signature(folder) == []


def test_ensure_restores_the_public_key_file_from_the_private_key(keys: Path) -> None:
    signing.ensure_signing_key()
    expected = (keys / signing.PUBLIC_KEY_NAME).read_text()
    (keys / signing.PUBLIC_KEY_NAME).write_text(other_key_pem()[1])  # one of another pair

    assert signing.ensure_signing_key() is False
    assert (keys / signing.PUBLIC_KEY_NAME).read_text() == expected

    (keys / signing.PUBLIC_KEY_NAME).unlink()
    assert signing.ensure_signing_key() is False
    assert (keys / signing.PUBLIC_KEY_NAME).read_text() == expected


def _race(barrier, results, action: Callable[[], object]) -> None:
    """In a child process: wait for every racer, run ``action``, report what it saw."""
    try:
        barrier.wait(timeout=30)
        outcome = action()
        results.put(("ok", outcome, signing.public_key_pem()))
    except BaseException as error:  # the parent reports it; a child's traceback is lost
        results.put(("error", repr(error), None))


def _create() -> bool:
    return signing.ensure_signing_key()


def _sign_own_folder(root: Path) -> Callable[[], str]:
    def action() -> str:
        own = root / str(os.getpid())
        own.mkdir()
        (own / "page.html").write_text(f"<p>{os.getpid()}</p>")
        write_manifest(own)
        return signing.sign_manifest(own)

    return action


def run_racers(count: int, action: Callable[[], object]) -> list[tuple[object, str]]:
    """Run ``action`` in ``count`` forked processes released at the same moment."""
    context = multiprocessing.get_context("fork")  # children inherit the test's settings
    barrier = context.Barrier(count)
    results = context.Queue()
    racers = [context.Process(target=_race, args=(barrier, results, action)) for _ in range(count)]
    for racer in racers:
        racer.start()
    outcomes = [results.get(timeout=60) for _ in racers]
    for racer in racers:
        racer.join(timeout=30)
    errors = [detail for status, detail, _ in outcomes if status != "ok"]
    assert not errors
    return [(detail, pem) for _, detail, pem in outcomes]


@pytest.mark.parametrize("attempt", range(4))
def test_processes_creating_the_key_at_once_end_up_with_one_pair(keys: Path, attempt: int) -> None:
    outcomes = run_racers(8, _create)

    assert sorted(created for created, _ in outcomes) == [False] * 7 + [True]
    public_pems = {pem for _, pem in outcomes}
    assert len(public_pems) == 1
    assert (keys / signing.PUBLIC_KEY_NAME).read_text() == public_pems.pop()
    assert signing.public_key_pem() == (keys / signing.PUBLIC_KEY_NAME).read_text()
    assert mode(keys / signing.PRIVATE_KEY_NAME) == 0o600
    assert not [p.name for p in keys.iterdir() if p.name.startswith(".tmp-")]


def test_actors_signing_their_first_snapshots_at_once_share_one_key(
    keys: Path, tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    root.mkdir()

    outcomes = run_racers(6, _sign_own_folder(root))

    fingerprints = {fingerprint for fingerprint, _ in outcomes}
    assert fingerprints == {signing.key_fingerprint(signing.public_key_pem())}
    snapshots = list(root.iterdir())
    assert len(snapshots) == 6
    for snapshot in snapshots:
        assert signing.verify_signature(snapshot) == []


# --- loading and fingerprints --------------------------------------------------------------------


def test_fingerprint_is_the_sha256_of_the_raw_public_key(keys: Path) -> None:
    signing.ensure_signing_key()
    pem = signing.public_key_pem()
    der = base64.b64decode("".join(pem.strip().splitlines()[1:-1]))
    raw = der[-32:]  # an Ed25519 SubjectPublicKeyInfo ends with the 32-byte key (RFC 8410 §4)
    assert len(der) == 44

    assert signing.key_fingerprint(pem) == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert signing.key_fingerprint(pem) != signing.key_fingerprint(other_key_pem()[1])


def test_a_missing_key_is_reported(keys: Path) -> None:
    with pytest.raises(
        signing.SigningKeyMissingError, match=r"no signing key at .*signing-key\.pem"
    ):
        signing.load_private_key()
    with pytest.raises(signing.SigningKeyError):
        signing.public_key_pem()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a key at all\n", "is not an unencrypted PEM private key"),
        (
            ec.generate_private_key(ec.SECP256R1()).private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
            "is not an Ed25519 key",
        ),
        (
            Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(b"passphrase"),
            ),
            "is not an unencrypted PEM private key",
        ),
    ],
    ids=["garbage", "ecdsa", "encrypted"],
)
def test_an_unusable_private_key_is_one_clear_error(keys: Path, content: bytes, message) -> None:
    keys.mkdir(parents=True)
    (keys / signing.PRIVATE_KEY_NAME).write_bytes(content)

    with pytest.raises(signing.SigningKeyError, match=message) as raised:
        signing.load_private_key()
    assert "\n" not in str(raised.value)
    with pytest.raises(signing.SigningKeyError, match=message):
        signing.ensure_signing_key()


def test_an_unusable_public_key_is_a_signing_key_error(keys: Path, folder: Path) -> None:
    signing.sign_manifest(folder)

    with pytest.raises(signing.SigningKeyError, match="not a PEM public key"):
        signing.key_fingerprint("-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n")
    with pytest.raises(signing.SigningKeyError, match="not a PEM public key"):
        signing.verify_signature(folder, "not a key")


@pytest.mark.skipif(OPENSSL is None, reason="no openssl binary on this machine")
def test_a_key_made_by_openssl_can_sign(keys: Path, folder: Path) -> None:
    keys.mkdir(mode=0o700, parents=True)
    made = subprocess.run(
        [OPENSSL, "genpkey", "-algorithm", "ed25519", "-out", keys / signing.PRIVATE_KEY_NAME],
        capture_output=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr

    assert signing.ensure_signing_key() is False  # the key there is kept
    signing.sign_manifest(folder)
    assert signing.verify_signature(folder) == []


# --- signing and verifying -----------------------------------------------------------------------


def test_sign_creates_the_key_and_writes_a_raw_64_byte_signature(keys: Path, folder: Path) -> None:
    fingerprint = signing.sign_manifest(folder)

    assert (keys / signing.PRIVATE_KEY_NAME).is_file()
    assert fingerprint == signing.key_fingerprint(signing.public_key_pem())
    signature = (folder / SIGNATURE_NAME).read_bytes()
    assert len(signature) == 64
    public = serialization.load_pem_public_key(signing.public_key_pem().encode())
    public.verify(signature, (folder / MANIFEST_NAME).read_bytes())  # raises if it is not
    assert signing.verify_signature(folder) == []
    assert signing.verify_signature(folder, signing.public_key_pem()) == []


def test_signing_again_gives_the_same_bytes(keys: Path, folder: Path) -> None:
    first = signing.sign_manifest(folder)
    signature = (folder / SIGNATURE_NAME).read_bytes()

    assert signing.sign_manifest(folder) == first
    assert (folder / SIGNATURE_NAME).read_bytes() == signature


def test_a_changed_manifest_no_longer_matches(keys: Path, folder: Path) -> None:
    signing.sign_manifest(folder)
    flip_byte(folder / MANIFEST_NAME, 3)

    assert signing.verify_signature(folder) == [
        "signature does not match manifest-sha256.txt (tried 1 trusted keys)"
    ]
    assert signing.verify_signature(folder, signing.public_key_pem()) == [
        "signature does not match manifest-sha256.txt"
    ]


def test_a_changed_signature_no_longer_matches(keys: Path, folder: Path) -> None:
    signing.sign_manifest(folder)
    flip_byte(folder / SIGNATURE_NAME, 40)

    assert signing.verify_signature(folder, signing.public_key_pem()) == [
        "signature does not match manifest-sha256.txt"
    ]


def test_a_missing_signature_is_reported(keys: Path, folder: Path) -> None:
    signing.ensure_signing_key()

    assert signing.verify_signature(folder) == ["signature missing: manifest-sha256.txt.sig"]


def test_a_truncated_signature_is_reported(keys: Path, folder: Path) -> None:
    signing.sign_manifest(folder)
    signature = folder / SIGNATURE_NAME
    signature.write_bytes(signature.read_bytes()[:63])

    assert signing.verify_signature(folder) == [
        "signature is 63 bytes, not 64: manifest-sha256.txt.sig"
    ]


def test_a_signature_by_another_key_does_not_match(keys: Path, folder: Path) -> None:
    signing.sign_manifest(folder)
    _, stranger_pem = other_key_pem()

    assert signing.verify_signature(folder, stranger_pem) == [
        "signature does not match manifest-sha256.txt"
    ]

    stranger, _ = other_key_pem()
    sign_with(stranger, folder)
    assert signing.verify_signature(folder) == [
        "signature does not match manifest-sha256.txt (tried 1 trusted keys)"
    ]


def test_a_good_signature_by_an_untrusted_key_is_reported(keys: Path, folder: Path) -> None:
    signing.ensure_signing_key()
    stranger, stranger_pem = other_key_pem()
    sign_with(stranger, folder)

    fingerprint = signing.key_fingerprint(stranger_pem)
    assert signing.verify_signature(folder, stranger_pem) == [
        f"signed by a key this archive does not trust ({fingerprint})"
    ]


def test_no_key_at_all_is_a_problem_not_an_error(keys: Path, folder: Path) -> None:
    sign_with(other_key_pem()[0], folder)

    assert signing.trusted_public_keys() == {}
    assert signing.verify_signature(folder) == [
        "no trusted public key to check manifest-sha256.txt.sig with"
    ]


def test_retired_keys_still_verify_older_snapshots(keys: Path, folder: Path) -> None:
    signing.ensure_signing_key()
    old_key, old_pem = other_key_pem()
    sign_with(old_key, folder)
    assert signing.verify_signature(folder) != []

    (keys / signing.RETIRED_DIR).mkdir()
    (keys / signing.RETIRED_DIR / "2024-01.pub.pem").write_text(old_pem)

    trusted = signing.trusted_public_keys()
    current = signing.key_fingerprint(signing.public_key_pem())
    old = signing.key_fingerprint(old_pem)
    assert list(trusted) == [current, old]
    assert trusted[old] == old_pem
    assert signing.verify_signature(folder) == []
    assert signing.verify_signature(folder, old_pem) == []


def test_an_unusable_retired_key_names_its_file(keys: Path) -> None:
    signing.ensure_signing_key()
    (keys / signing.RETIRED_DIR).mkdir()
    (keys / signing.RETIRED_DIR / "broken.pub.pem").write_text("nope\n")

    with pytest.raises(signing.SigningKeyError, match=r"retired/broken\.pub\.pem is not a PEM"):
        signing.trusted_public_keys()


# --- checking without Vellum ---------------------------------------------------------------------


def openssl_has_rawin() -> bool:
    if OPENSSL is None:
        return False
    usage = subprocess.run([OPENSSL, "pkeyutl", "-help"], capture_output=True, text=True)
    return "-rawin" in usage.stdout + usage.stderr


@pytest.mark.skipif(not openssl_has_rawin(), reason="needs openssl with pkeyutl -rawin (3.0+)")
def test_openssl_verifies_the_signature(keys: Path, folder: Path) -> None:
    signing.sign_manifest(folder)
    public = keys / signing.PUBLIC_KEY_NAME
    command = [OPENSSL, "pkeyutl", "-verify", "-pubin", "-inkey", str(public), "-rawin"]
    command += ["-in", MANIFEST_NAME, "-sigfile", SIGNATURE_NAME]  # the command in signing.py

    def openssl_verify() -> subprocess.CompletedProcess:
        return subprocess.run(
            command,
            cwd=folder,
            capture_output=True,
            text=True,
        )

    good = openssl_verify()
    assert good.returncode == 0, good.stderr
    assert "Signature Verified Successfully" in good.stdout

    flip_byte(folder / MANIFEST_NAME, 0)
    bad = openssl_verify()
    assert bad.returncode != 0
    assert "Signature Verification Failure" in bad.stdout + bad.stderr


# --- manage.py init ------------------------------------------------------------------------------


@pytest.fixture
def data_dir(settings, keys: Path, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    settings.DATA_DIR = data
    settings.ARCHIVE_DIR = data / "archive"
    settings.SOURCES_DIR = data / "sources"
    settings.LOGS_DIR = data / "logs"
    settings.STATIC_ROOT = data / "static"
    return data


@pytest.mark.django_db
def test_init_creates_the_key_and_prints_its_fingerprint(data_dir: Path, keys: Path) -> None:
    first = io.StringIO()
    call_command("init", stdout=first)
    fingerprint = signing.key_fingerprint(signing.public_key_pem())

    assert f"Signing key created: {keys}/signing-key.pub.pem ({fingerprint})\n" in first.getvalue()
    assert mode(keys) == 0o700

    again = io.StringIO()
    call_command("init", stdout=again)
    assert f"Signing key: {keys}/signing-key.pub.pem ({fingerprint})\n" in again.getvalue()
    assert "created" not in again.getvalue().split("Signing key")[1]


@pytest.mark.django_db
def test_init_turns_a_bad_key_into_a_command_error(data_dir: Path, keys: Path) -> None:
    keys.mkdir(parents=True)
    (keys / signing.PRIVATE_KEY_NAME).write_text("not a key\n")

    with pytest.raises(CommandError, match=r"signing-key\.pem is not an unencrypted PEM"):
        call_command("init", stdout=io.StringIO())


# --- the public views ----------------------------------------------------------------------------


@pytest.fixture
def static_root(settings) -> None:
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # whitenoise wants it


@pytest.mark.django_db
def test_the_public_key_is_served_to_anyone(keys: Path, static_root: None) -> None:
    signing.ensure_signing_key()

    response = Client().get("/keys/signing-key.pub.pem")

    assert reverse("core:public_key") == "/keys/signing-key.pub.pem"
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-pem-file"
    assert response.content.decode() == (keys / signing.PUBLIC_KEY_NAME).read_text()
    assert response.content.decode() == signing.public_key_pem()


@pytest.mark.django_db
def test_the_trusted_keys_are_listed_as_json(keys: Path, static_root: None) -> None:
    signing.ensure_signing_key()
    _, old_pem = other_key_pem()
    (keys / signing.RETIRED_DIR).mkdir()
    (keys / signing.RETIRED_DIR / "old.pub.pem").write_text(old_pem)
    current = signing.key_fingerprint(signing.public_key_pem())

    response = Client().get(reverse("core:public_keys"))

    assert response.status_code == 200
    assert response.json() == {
        "current": current,
        "keys": {current: signing.public_key_pem(), signing.key_fingerprint(old_pem): old_pem},
    }


@pytest.mark.django_db
def test_the_key_views_answer_503_when_a_key_cannot_be_read(
    keys: Path, static_root: None, caplog
) -> None:
    signing.ensure_signing_key()
    (keys / signing.RETIRED_DIR).mkdir()
    (keys / signing.RETIRED_DIR / "old.pub.pem").write_text("not a key\n")
    (keys / signing.PRIVATE_KEY_NAME).write_text("not a key either\n")
    client = Client()
    for url in ("/keys/signing-key.pub.pem", "/keys.json"):
        response = client.get(url)
        assert response.status_code == 503, url
        assert b"signing key cannot be read" in response.content
    assert "Cannot serve the public signing key" in caplog.text


@pytest.mark.django_db
def test_the_key_views_answer_404_without_a_key(keys: Path, static_root: None) -> None:
    client = Client()
    for url in ("/keys/signing-key.pub.pem", "/keys.json"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert response["Content-Type"].startswith("text/plain")
        assert b"no signing key yet" in response.content
    assert not keys.exists()  # looking must not create a key
