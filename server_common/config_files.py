"""Reading a server's configuration: a TOML file, then the command line's values over it.

Each role (`broker/config.py`, `quorum/config.py`) owns its keys, defaults and checks; what they
share is how the raw settings are gathered and the one `ConfigError` a bad setting raises, which
the command line turns into a usage error.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message says which and why."""


def read_settings(path: Path | None, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of `path` (TOML; none when `path` is None) with `overrides` applied over
    them: flag values keyed like the TOML keys, where None means the flag was not given.
    Raises ConfigError naming the file when it cannot be read or parsed."""
    settings: dict[str, Any] = {}
    if path is not None:
        try:
            settings = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise ConfigError(f"cannot read config file {path}: {error}") from error
    settings.update({key: value for key, value in overrides.items() if value is not None})
    return settings
