"""Named credential sets, and what a targets file may say about secrets (issue 34).

The main config is the operator's; a targets file is often written by a discovery system. A targets file
therefore names credentials only by reference (``credentials: NAME``, a set in the main config's
``credentials``) or as files inside ``collector.secrets_dir``: never an environment variable, never a file
elsewhere on the host, and never the opt-in to send a password in clear. These functions work on the raw
YAML documents, before the schema, so that every problem carries its location.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from collector import secret_files

# The keys a credential set may give each section of a target.
SECTION_KEYS = {
    "snmp": frozenset(
        {
            "version",
            "community_env",
            "community_file",
            "user",
            "auth_protocol",
            "auth_key_env",
            "auth_key_file",
            "priv_protocol",
            "priv_key_env",
            "priv_key_file",
        }
    ),
    "gnmi": frozenset(
        {"username_env", "username_file", "password_env", "password_file", "tls", "plaintext_credentials"}
    ),
}
TLS_FILE_KEYS = ("ca_file", "cert_file", "key_file")
_USE_A_SET = "use credentials: NAME (a set of the main config's credentials)"


def check_set_keys(section: str, keys: Any) -> None:
    """Refuse a credential set's section that gives anything but credentials.

    Raises:
        ValueError: a key that is not a credential of ``section``.
    """
    wrong = sorted(set(keys) - SECTION_KEYS[section])
    if wrong:
        raise ValueError(f"not credentials of a {section} section: {', '.join(map(str, wrong))}")


def apply(target: Any, sets: dict[str, dict[str, dict[str, Any]]], where: str) -> tuple[Any, list[str]]:
    """``target`` with the set its ``credentials`` names merged into its ``snmp`` and ``gnmi`` sections.

    ``sets``: name -> section -> keys. A key given both by the set and by the target is a problem.
    """
    if not isinstance(target, dict) or "credentials" not in target:
        return target, []
    target = dict(target)
    name = target.pop("credentials")
    if not isinstance(name, str) or name not in sets:
        known = ", ".join(sorted(sets)) or "none configured"
        return target, [f"{where}.credentials: no credential set named {name!r} (known: {known})"]
    problems: list[str] = []
    for section, given in sets[name].items():
        mine = target.get(section)
        if not isinstance(mine, dict):
            continue  # the target does not use that protocol
        both = sorted(set(mine) & set(given))
        problems += [f"{where}.{section}.{key}: given both here and by credentials {name!r}" for key in both]
        target[section] = {**given, **mine}
    return target, problems


def confine(target: Any, root: Path | None, where: str) -> tuple[Any, dict[str, frozenset[str]], list[str]]:
    """Check a targets file's own secret references and make its secret files relative to ``root``.

    Returns the target with those paths made absolute under ``root``, the secret file keys per section
    (``snmp``, ``gnmi``, ``tls``) to check again when read, and every problem with its location.
    """
    if not isinstance(target, dict):
        return target, {}, []
    target = dict(target)
    confined: dict[str, frozenset[str]] = {}
    problems: list[str] = []
    for section in ("snmp", "gnmi"):
        body = target.get(section)
        if not isinstance(body, dict):
            continue
        body = dict(body)
        keys = SECTION_KEYS[section] & {k for k in body if k.endswith(("_file", "_env"))}
        for key in sorted(keys):
            if key.endswith("_env"):
                problems.append(
                    f"{where}.{section}.{key}: a targets file may not read environment variables; {_USE_A_SET}"
                )
            else:
                body[key] = _inside(body[key], root, f"{where}.{section}.{key}", problems)
        if body.get("plaintext_credentials"):
            problems.append(
                f"{where}.{section}.plaintext_credentials: only the main config may opt in; {_USE_A_SET}"
            )
        tls = body.get("tls")
        if section == "gnmi" and isinstance(tls, dict):
            tls = dict(tls)
            named = [k for k in TLS_FILE_KEYS if k in tls]
            for key in named:
                tls[key] = _inside(tls[key], root, f"{where}.gnmi.tls.{key}", problems)
            body["tls"] = tls
            confined["tls"] = frozenset(named)
        confined[section] = frozenset(k for k in keys if k.endswith("_file"))
        target[section] = body
    return target, confined, problems


def _inside(value: Any, root: Path | None, where: str, problems: list[str]) -> Any:
    """``value`` as a path under ``root``, or the problem why not (a non-string is the schema's to refuse)."""
    if not isinstance(value, str):
        return value
    if root is None:
        problems.append(
            f"{where}: a targets file may name secret files only inside collector.secrets_dir "
            f"(not set); {_USE_A_SET}"
        )
        return value
    # absolute (an absolute value stays as it is), so that the targets file's folder is not put before it
    path = Path(os.path.abspath(root / value))
    if secret_files.outside(path, root):
        problems.append(f"{where}: {path} is outside collector.secrets_dir ({root})")
    return str(path)
