"""The database: where it is, how to connect, and the schema migrations.

`SEARCHEVAL_DATABASE_URL` (or an explicit URL) names a Postgres with pgvector. When neither is
given, an embedded Postgres 16 + pgvector (the `pgserver` package) is started, or reused, under
`.searcheval/pg` in the working directory; it keeps running after the process exits so the next
run reuses it (`stop_embedded` stops it).

Connections are opened in autocommit mode: every write in `searcheval.store` that must be atomic
runs inside `conn.transaction()`, so a failure leaves nothing half-written.

Passwords never appear in messages: `describe(url)` is what logs and errors show.

The password may also come from a Prefect Secret block: `SEARCHEVAL_DATABASE_PASSWORD_SECRET`
names the block, whose value is the password used with the URL of `SEARCHEVAL_DATABASE_URL` (or
`--database-url`) when that URL holds none. The library never imports Prefect: the flows, the
tasks and the command line install the reader (`use_password_source`, tasks/secrets.py), and the
value is read once per process, remembered for redaction, and handed to libpq only, never put
into a URL, a message, a log, an artifact or a row.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import subprocess
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable, Iterator

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types import TypeInfo

from searcheval.errors import DatabaseError
from searcheval.store import sql

ENV_URL = "SEARCHEVAL_DATABASE_URL"
PASSWORD_SECRET_ENV = "SEARCHEVAL_DATABASE_PASSWORD_SECRET"
EMBEDDED_DIR = Path(".searcheval")
EMBEDDED_PGDATA = EMBEDDED_DIR / "pg"
#: the embedded server's settings (name: (environment variable, default)), applied with ALTER
#: SYSTEM when its data folder is made. shared_buffers: Postgres' default 128MB is counted in the
#: resident memory of every process that touches it (checkpointer, background writer and each
#: busy backend: 370-490 MiB of a WANDS-size run's, 1.6 GiB sum), while the tables and the
#: HNSW index are read from the OS's page cache either way; 32MB took that to 110-140 MiB, the
#: cold index of 43k vectors from 95 s to 128 s and left searches as fast (issue #27)
EMBEDDED_SETTINGS = {"shared_buffers": ("SEARCHEVAL_PG_SHARED_BUFFERS", "32MB")}

_logger = logging.getLogger(__name__)

_MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")

# One thread of this process at a time in start_embedded: pgserver registers a server's handle
# before it has started it, and a second thread that found that half-made handle failed
# (an AssertionError, retried by the task a second later: a warm run lost a second to it).
_start_lock = threading.Lock()


# --------------------------------------------------------------------------- where


def describe(url: str) -> str:
    """`user@host:port/dbname` for logs and messages; the password is left out."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        return "<unparseable database URL>"
    user = parts.get("user")
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    port = parts.get("port")
    dbname = parts.get("dbname") or user or "?"
    text = f"{user}@" if user else ""
    text += str(host)
    if port:
        text += f":{port}"
    return f"{text}/{dbname}"


def redact(text: str, url: str) -> str:
    """`text` with the URL's password (if any), and the Secret block's, replaced by `***`."""
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    for secret in (password, *_passwords.values()):
        if secret:
            text = text.replace(str(secret), "***")
    return text


def resolve_url(url: str | None = None) -> str:
    """`url`, else `$SEARCHEVAL_DATABASE_URL`, else the embedded server under `.searcheval/pg` in
    the working directory (started if it is not running)."""
    if url:
        return url
    env = os.environ.get(ENV_URL)
    if env:
        return env
    server = start_embedded(Path.cwd() / EMBEDDED_PGDATA)
    return server.get_uri()


def _import_pgserver():
    # platformdirs warns at pgserver's import when XDG_RUNTIME_DIR is unset (then it falls back
    # to /tmp/runtime-<uid>, which is what we want): silence that one warning only.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"XDG_RUNTIME_DIR is not set")
        import pgserver
    return pgserver


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def start_embedded(pgdata: str | Path, *, keep_running: bool = True):
    """Start (or reuse) the embedded Postgres whose data lives in `pgdata`; returns the pgserver
    handle (`.get_uri()`, `.psql(sql)`, `.cleanup()`).

    Safe when several processes do it at once: an exclusive fcntl lock on `<pgdata>.lock` covers
    the directory creation, initdb and start. With `keep_running` the server outlives this
    process (the next run reuses it); without, `.cleanup()` or interpreter exit stops it.

    The server listens only on a unix socket in pgdata. When that path is too long for a socket
    (about 100 characters), pgserver itself puts the socket in a short directory under the user
    runtime dir (`$XDG_RUNTIME_DIR` or `/tmp/runtime-<uid>`), keyed by a hash of the pgdata path.
    """
    pgdata = Path(pgdata).expanduser().absolute()
    pgserver = _import_pgserver()
    with _start_lock:
        return _start_embedded(pgserver, pgdata, keep_running)


def embedded_settings() -> dict[str, str]:
    """The server settings the embedded Postgres runs with (`EMBEDDED_SETTINGS`, each overridable
    by its environment variable), checked: a value Postgres would refuse fails here, named."""
    out = {}
    for name, (env, default) in EMBEDDED_SETTINGS.items():
        value = os.environ.get(env, default).strip()
        if not re.fullmatch(r"\d+\s*(kB|MB|GB)", value):
            raise DatabaseError(f"{env}={value!r}: expected a size such as 32MB or 1GB")
        out[name] = value.replace(" ", "")
    return out


def _start_embedded(pgserver, pgdata: Path, keep_running: bool):
    cached = pgserver.PostgresServer._instances.get(pgdata.resolve())
    if cached is not None and not _still_serving(cached, pgdata):
        # stopped behind this process's back (stop_embedded, a crash, a reboot): start it again
        pgserver.PostgresServer._instances.pop(pgdata.resolve(), None)
    wanted = embedded_settings()
    cleanup = None if keep_running else "stop"
    try:
        with _file_lock(pgdata.with_name(pgdata.name + ".lock")):
            server = pgserver.get_server(pgdata, cleanup_mode=cleanup)
            if _configured(pgdata) != wanted:
                # a new data folder (or other settings asked for): written with ALTER SYSTEM,
                # which a restart applies; once per folder, ~1 s
                server.psql("".join(f"ALTER SYSTEM SET {name} = '{value}';\n"
                                    for name, value in wanted.items()))
                _pg_ctl_stop(pgserver, pgdata)
                server = pgserver.get_server(pgdata, cleanup_mode=cleanup)
            return server
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        log = pgdata / "log"
        raise DatabaseError(
            f"cannot start the embedded Postgres in {pgdata} ({exc.__class__.__name__}: {exc}); "
            f"see its log {log}" + ("" if log.exists() else " (not written)")
        ) from exc


def _still_serving(cached, pgdata: Path) -> bool:
    """Whether the server a cached pgserver handle started still serves `pgdata`: its
    postmaster.pid is there, names the same process, and that process runs. (The process alone is
    not enough: `pg_ctl stop` returns once the pid file is gone, while the old postmaster may
    still be exiting, and a handle kept then would never start the server again.)"""
    from pgserver.utils import PostmasterInfo

    current = PostmasterInfo.read_from_pgdata(pgdata)
    return current is not None and current.pid == cached.get_postmaster_info().pid and \
        current.is_running()


def _configured(pgdata: Path) -> dict[str, str]:
    """The settings of EMBEDDED_SETTINGS that `postgresql.auto.conf` (ALTER SYSTEM's file) holds."""
    try:
        text = (pgdata / "postgresql.auto.conf").read_text(encoding="utf-8")
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(r"\s*(\w+)\s*=\s*'([^']*)'\s*", line)
        if match and match.group(1) in EMBEDDED_SETTINGS:
            found[match.group(1)] = match.group(2)
    return found


def _pg_ctl_stop(pgserver, pgdata: Path) -> None:
    user = "pgserver" if os.geteuid() == 0 else None
    pgserver.pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pgdata, user=user)
    pgserver.PostgresServer._instances.pop(pgdata.resolve(), None)


def stop_embedded(pgdata: str | Path | None = None) -> bool:
    """Stop the embedded server whose data is in `pgdata` (default `.searcheval/pg` in the working
    directory). Returns False when it was not running."""
    pgdata = Path(pgdata or Path.cwd() / EMBEDDED_PGDATA).expanduser().absolute()
    if not (pgdata / "postmaster.pid").exists():
        return False
    pgserver = _import_pgserver()
    with _file_lock(pgdata.with_name(pgdata.name + ".lock")):
        try:
            _pg_ctl_stop(pgserver, pgdata)
        except subprocess.CalledProcessError:
            return False
    return True


# --------------------------------------------------------------------------- the password

_password_source: Callable[[str], str] | None = None  # block name -> its value (Prefect)
_passwords: dict[str, str] = {}  # read once per process, by block name


def use_password_source(source: Callable[[str], str] | None) -> None:
    """Install the reader of `SEARCHEVAL_DATABASE_PASSWORD_SECRET`'s block (tasks/secrets.py):
    a function from a Secret block's name to its value."""
    global _password_source
    _password_source = source


def secret_password(url: str) -> str | None:
    """The password of the Secret block `SEARCHEVAL_DATABASE_PASSWORD_SECRET` names, for `url`
    when it is the configured URL (`SEARCHEVAL_DATABASE_URL`, which `--database-url` sets) and
    holds no password of its own; else None. Never for another server: a lookup's or a mapping's
    database gets its own credentials."""
    name = os.environ.get(PASSWORD_SECRET_ENV, "").strip()
    if not name or url != os.environ.get(ENV_URL):
        return None
    try:
        if conninfo_to_dict(url).get("password"):
            return None  # the URL's own password wins
    except psycopg.Error:
        return None  # `connect` says the URL is not valid
    if name not in _passwords:
        if _password_source is None:
            raise DatabaseError(f"{PASSWORD_SECRET_ENV} names the Prefect Secret block {name!r}, "
                                "read by the flows and the searcheval command: this process "
                                "cannot read it (run it from a flow, or put the password in "
                                f"{ENV_URL})")
        from searcheval.redaction import remember

        value = _password_source(name)
        remember(value)
        _passwords[name] = value
    return _passwords[name]


# --------------------------------------------------------------------------- connect


def connect(url: str, *, attempts: int = 5, backoff_s: float = 0.25,
            connect_timeout_s: int = 10) -> psycopg.Connection:
    """An autocommit connection with the pgvector types registered (when the extension exists;
    `migrate` registers them after creating it).

    OperationalError (server not up yet, too many connections) is retried `attempts` times with
    exponential backoff (`backoff_s`, doubled each time); then one DatabaseError naming host and
    database, without the password.
    """
    if not url:
        raise DatabaseError(f"no database URL: set {ENV_URL} or pass --database-url")
    try:
        conninfo_to_dict(url)
    except psycopg.Error:
        raise DatabaseError(
            "the database URL is not a valid libpq URI or connection string "
            "(expected postgresql://user:password@host:port/dbname)"
        ) from None
    where = describe(url)
    password = secret_password(url)
    extra = {"password": password} if password else {}
    last: Exception | None = None
    for attempt in range(max(1, attempts)):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout_s,
                                   **extra)
        except psycopg.OperationalError as exc:
            last = exc
            _logger.info("connecting to %s failed (attempt %d of %d)", where, attempt + 1, attempts)
            continue
        try:
            register_vector_types(conn)
        except psycopg.Error as exc:
            conn.close()
            raise DatabaseError(f"connected to {where} but cannot read its types: "
                                f"{redact(str(exc), url)}") from None
        return conn
    reason = redact(str(last).strip().replace("\n", " "), url)
    raise DatabaseError(f"cannot connect to the database {where} after {attempts} attempt(s): "
                        f"{reason}") from None


def register_vector_types(conn: psycopg.Connection) -> bool:
    """Register pgvector's types on `conn` if the extension is installed; True if it was."""
    from pgvector.psycopg import register_vector

    if TypeInfo.fetch(conn, "vector") is None:
        return False
    register_vector(conn)
    return True


def open_database(url: str | None = None) -> psycopg.Connection:
    """resolve_url + connect + migrate: a ready-to-use connection."""
    conn = connect(resolve_url(url))
    migrate(conn)
    return conn


# --------------------------------------------------------------------------- migrate


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def migrations() -> list[Migration]:
    """`searcheval/store/migrations/NNN_*.sql`, in version order."""
    folder = resources.files("searcheval.store") / "migrations"
    found: dict[int, Migration] = {}
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise DatabaseError(f"two migrations with version {version:03d}: "
                                f"{found[version].name} and {entry.name}")
        found[version] = Migration(version, entry.name, entry.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


def migrate(conn: psycopg.Connection) -> list[str]:
    """Apply the migrations not applied yet, in order, in one transaction; returns their names.

    Each applied version is recorded in `schema_migrations`, so an existing database is upgraded,
    never dropped. A transaction-scoped advisory lock makes concurrent `migrate` calls wait for
    each other (the second then finds everything applied).
    """
    pending = migrations()
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute(sql.MIGRATION_LOCK, {"key": sql.MIGRATION_LOCK_KEY})
        conn.execute(sql.CREATE_SCHEMA_MIGRATIONS)
        rows = conn.execute(sql.SELECT_SCHEMA_MIGRATIONS).fetchall()
        applied = {version: checksum for version, checksum in rows}
        for migration in pending:
            if migration.version in applied:
                if applied[migration.version] != migration.checksum:
                    _logger.warning("migration %s changed after it was applied; add a new "
                                    "numbered migration instead of editing it", migration.name)
                continue
            conn.execute(migration.text)
            conn.execute(sql.INSERT_SCHEMA_MIGRATION, {
                "version": migration.version, "name": migration.name,
                "checksum": migration.checksum,
            })
            applied_now.append(migration.name)
    register_vector_types(conn)
    if applied_now:
        _logger.info("applied migrations %s", ", ".join(applied_now))
    return applied_now


def applied_migrations(conn: psycopg.Connection) -> list[int]:
    """Versions recorded in `schema_migrations`, ascending."""
    return [row[0] for row in conn.execute(sql.SELECT_SCHEMA_MIGRATIONS).fetchall()]
