"""What the environment of every child of zfsnas-bench (fio, zfs, zpool, sysctl) holds.

Owns the list of secrets that must not reach a child: the Grafana token a user may give as
$ZFSNAS_GRAFANA_TOKEN. `take_secrets` moves them out of this process's environment at start, so
no child inherits them whatever spawns it (the exporter's CommandRunner included), and
`child_environment` builds the explicit environment the runner hands to fio.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

TOKEN_VARIABLE = "ZFSNAS_GRAFANA_TOKEN"
SECRET_VARIABLES = (TOKEN_VARIABLE,)


def take_secrets(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Remove every secret variable from `environ` (default: this process's) and return them."""
    env = os.environ if environ is None else environ
    return {name: env.pop(name) for name in SECRET_VARIABLES if name in env}


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any secret, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES}
    env.update(extra or {})
    return env
