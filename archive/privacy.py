"""Keep DATA_DIR to the user Vellum runs as (issue 16 item 4, DESIGN.md §8 "Secrets stay private").

DATA_DIR holds the database (session keys in plain text, password and token hashes), the
signing key, the archive and the saved inputs: none of it is for other users of the machine.
Three things keep it so:

- ``restrict_umask`` sets the process umask to PRIVATE_UMASK; archive/settings.py calls it, so
  it holds in every entry point (manage.py, the WSGI/ASGI app, the actors, the huey consumer)
  and in every tool they start, whatever umask the shell or service manager gave them;
- files Vellum sets a mode on itself get FILE_MODE (``core.folder.manifest.atomic_write``, Django's
  FILE_UPLOAD_PERMISSIONS for collected static files), folders DIR_MODE;
- ``tighten_data_dir`` (run by ``manage.py init``) closes a DATA_DIR made by an older version or
  by hand, and ``data_dir_problems`` names what is still open (a start-up check warns).

The web server, the actors and the tools all run as the same user, so they still read it all.
Only this module's own standard library is imported: settings import it before Django is set up.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077  # no permission for group or others on anything created
FILE_MODE = 0o600
DIR_MODE = 0o700
OTHERS = 0o077  # the group and others bits of a mode


def restrict_umask() -> int:
    """Set the process umask to PRIVATE_UMASK; return the umask it had."""
    return os.umask(PRIVATE_UMASK)


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) and leave it DIR_MODE (0700) whatever the umask.

    Only ``path`` itself is restricted: its parents may be shared folders (/srv, /var/lib).
    Raises OSError when it cannot be created or its mode cannot be set.
    """
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    restrict(path)


def restrict(path: Path) -> bool:
    """Take group and others' permissions off ``path`` (owner's bits kept); return True if its
    mode changed. A symbolic link, or a path that does not exist, is left alone (False).
    Raises OSError when the mode cannot be changed (another owner, a read-only mount)."""
    try:
        status = path.lstat()
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(status.st_mode) or not status.st_mode & OTHERS:
        return False
    os.chmod(path, stat.S_IMODE(status.st_mode) & ~OTHERS)
    return True


def tighten_data_dir(data_dir: Path) -> list[Path]:
    """Restrict ``data_dir`` to DIR_MODE and take group and others' bits off everything directly
    in it and in its ``keys`` folder (database with -wal/-shm, keys, secrets, top folders);
    return the paths changed.

    Deeper files a previous version left open are not walked (a large archive holds millions):
    with DATA_DIR 0700 no other user can reach them. Raises OSError as ``restrict`` does.
    """
    changed = [data_dir] if restrict(data_dir) else []
    for folder in (data_dir, data_dir / "keys"):
        if folder.is_dir() and not folder.is_symlink():
            changed += [entry for entry in sorted(folder.iterdir()) if restrict(entry)]
    return changed


def data_dir_problems(data_dir: Path) -> list[str]:
    """Name what of ``data_dir`` other users may reach: ``data_dir`` itself when group or others
    have any permission on it, else nothing (what lies inside is then out of their reach).
    A ``data_dir`` that does not exist yet has no problem."""
    try:
        mode = stat.S_IMODE(data_dir.stat().st_mode)
    except FileNotFoundError:
        return []
    if not mode & OTHERS:
        return []
    return [f"{data_dir} is mode {mode:04o}: other users of this machine can reach it"]
