"""Values written into systemd unit files: one token each, or refused.

systemd reads a unit line by line, expands `%` specifiers in most settings and `$VAR` in command
lines, and splits command lines and Environment= on whitespace outside quotes (systemd.syntax(7),
systemd.service(5) "Command lines", systemd.exec(5) Environment=). A value that reaches a unit file
passes through `unit_value`: it comes out as exactly one token that systemd reads back as the same
string, or it is refused with the reason. Validation upstream (full-match patterns) should already
have refused anything odd; this is the last line, so a bypass cannot add lines to a unit.
"""

from __future__ import annotations

import re
from enum import Enum

from ..errors import PlanError

# Words systemd reads literally without quotes: no whitespace, quotes, backslash, `%`, `$` or `;`.
_PLAIN = re.compile(r"[A-Za-z0-9_./:=+,@-]+")
# C0 controls, DEL, C1 controls and Unicode's line and paragraph separators: a newline would start a new
# setting; the others have no safe spelling, or break the line for a reader or another tool.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
MAX_LENGTH = 4096


class Place(str, Enum):
    EXEC = "exec"  # one word of ExecStart=: `%` and `$` are special
    ENVIRONMENT = "environment"  # one assignment of Environment=: `%` is special, `$` is not
    SETTING = "setting"  # the value of a setting such as Description=: `%` is special, no quoting
    COMMENT = "comment"  # the text of a `#` line: nothing is special but the end of the line


def _refuse_unsafe(text: str, variable: str) -> None:
    control = _CONTROL.search(text)
    if control:
        raise PlanError(variable, f"{text!r} holds the control character {control.group()!r}; a unit file cannot carry it")
    if len(text) > MAX_LENGTH:
        raise PlanError(variable, f"a value of {len(text)} characters is longer than a unit line may be ({MAX_LENGTH})")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PlanError(variable, f"{text!r} is not valid text (lone surrogate)") from exc


def unit_value(value: object, place: Place | str, variable: str = "unit file") -> str:
    """`value` spelled for `place` in a unit file, read back by systemd as exactly `value`."""
    text = str(value)
    where = Place(place)
    _refuse_unsafe(text, variable)
    if where is Place.COMMENT:
        return text
    text = text.replace("%", "%%")
    if where is Place.SETTING:
        if text != text.strip():
            raise PlanError(variable, f"{text!r} starts or ends with blanks, which systemd drops from a setting")
        return text
    if where is Place.EXEC:
        if text == ";":
            raise PlanError(variable, "a lone ';' separates commands on a systemd command line")
        text = text.replace("$", "$$")
    if _PLAIN.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
