#!/usr/bin/env python
"""Move the keys of a LibreTranslate key database into a key file for `vanilla-transformer serve --api-keys FILE`.

LibreTranslate keeps its keys in SQLite (`--api-keys-db-path`, default db/api_keys.db; its libretranslate/api_keys.py):
a table `api_keys` of `api_key`, `req_limit` (requests per minute) and `char_limit` (NULL: the server's). Each key
becomes a line `KEY REQUESTS_PER_MINUTE`, in the database's order:

    python scripts/libretranslate_keys.py db/api_keys.db /etc/vanilla-transformer/api-keys.txt

The database is opened read-only (never created or upgraded, as LibreTranslate's own code would). The file is written
whole or not at all (a server re-reading it on SIGHUP never sees half of it), mode 0640, or an existing file's owner,
group and mode with --force (without it, an existing file is refused). What a key file cannot hold is left out and
said on stderr by row number, never by key: a key that is not 1-1000 printable ASCII characters without spaces (it
travels in an HTTP header) or that starts with `#` (a comment line), and a key whose req_limit is not a whole number
from 1 to 10^15 - 1 (LibreTranslate refuses every request of a key below 1; left out, it is refused 403). A key's
own char_limit is not carried: `--char-limit` is every request's; stderr counts those keys.
"""

import argparse
import os
import sqlite3
import sys
import urllib.parse

from vanilla_transformer.deploy.server.settings import KEY_FORM
from vanilla_transformer.files import replaced_atomically


def rows_of(database: str) -> list[tuple[int, object, object, object]]:
    """(row number, api_key, req_limit, char_limit) of each row of LibreTranslate's table, read-only; a database of
    an older schema without char_limit reads NULL for it."""
    if not os.path.isfile(database):
        raise SystemExit(f"error: {database}: no such database file")
    uri = f"file:{urllib.parse.quote(os.path.abspath(database))}?mode=ro"
    try:
        with sqlite3.connect(uri, uri=True) as connection:
            columns = {row[1] for row in connection.execute("PRAGMA table_info(api_keys)")}
            if not {"api_key", "req_limit"} <= columns:
                raise SystemExit(f"error: {database}: no table api_keys (api_key, req_limit) of LibreTranslate's")
            char_limit = "char_limit" if "char_limit" in columns else "NULL"
            query = f"SELECT rowid, api_key, req_limit, {char_limit} FROM api_keys ORDER BY rowid"
            return list(connection.execute(query))
    except sqlite3.DatabaseError as error:
        raise SystemExit(f"error: {database}: not a SQLite database LibreTranslate wrote ({error})") from None


def key_lines(rows) -> tuple[list[str], list[str]]:
    """The key file's lines, and what was left out or changed, each a sentence naming rows (never a key)."""
    lines, bad_form, no_requests, own_chars = [], [], [], []
    for number, key, req_limit, char_limit in rows:
        if not isinstance(key, str) or not KEY_FORM.fullmatch(key) or key.startswith("#"):
            bad_form.append(number)
        elif not isinstance(req_limit, int) or not 1 <= req_limit < 10**15:
            no_requests.append(number)
        else:
            lines.append(f"{key} {req_limit}")
            if char_limit not in (None, 0):
                own_chars.append(number)
    notes = []
    if bad_form:
        notes.append(
            f"left out: rows {', '.join(map(str, bad_form))}: a key must be 1-1000 printable ASCII characters without "
            "spaces, not starting with #"
        )
    if no_requests:
        notes.append(
            f"left out: rows {', '.join(map(str, no_requests))}: a req_limit that is not a whole number from 1 to "
            "10^15 - 1 (LibreTranslate refuses every request of a key below 1)"
        )
    if own_chars:
        notes.append(
            f"{len(own_chars)} key(s) with their own char_limit (rows {', '.join(map(str, own_chars))}): serve's "
            "--char-limit applies to every request"
        )
    return lines, notes


def write_key_file(path: str, lines: list[str], force: bool) -> None:
    """`lines` as the key file `path`, whole or not at all: mode 0640, or an existing file's owner, group and mode
    with `force` (refused without it)."""
    existing = os.stat(path) if os.path.exists(path) else None
    if existing is not None and not force:
        raise SystemExit(f"error: {path} exists; give --force to replace it")
    with replaced_atomically(path) as written:
        descriptor = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        with open(descriptor, "w", encoding="utf-8") as f:
            f.write("# keys moved from LibreTranslate's database: KEY REQUESTS_PER_MINUTE\n")
            f.writelines(line + "\n" for line in lines)
        if existing is not None:
            os.chmod(written, existing.st_mode & 0o7777)
            if hasattr(os, "chown") and (existing.st_uid, existing.st_gid) != (os.getuid(), os.getgid()):
                os.chown(written, existing.st_uid, existing.st_gid)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database", help="LibreTranslate's key database (db/api_keys.db)")
    parser.add_argument("key_file", help="the key file to write, for serve --api-keys")
    parser.add_argument("--force", action="store_true", help="replace an existing key file")
    args = parser.parse_args(argv)
    if os.path.exists(args.key_file) and os.path.samefile(args.key_file, args.database):
        raise SystemExit(f"error: {args.key_file} is the database itself")
    lines, notes = key_lines(rows_of(args.database))
    if not lines:
        raise SystemExit(f"error: {args.database}: no key a key file can hold" + "".join(f"; {n}" for n in notes))
    write_key_file(args.key_file, lines, args.force)
    print(f"{len(lines)} key(s) written to {args.key_file}", file=sys.stderr)
    for note in notes:
        print(note, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
