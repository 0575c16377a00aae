"""What every feature's replies share, as Markdown: markers, mentions, refusals.

Every reply carries a hidden marker naming the delivery and the command it answers,
so a retried delivery edits its reply instead of posting a second one.  Outside text
(logins, option text) is escaped with ``bot.core.render.markdown``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from bot.core.commands import CommandProblem
from bot.core.formatting import iso_date_time
from bot.core.render.markdown import code, escape

_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
ACTIONS = {"rebaseline": "`/rebaseline`", "approve": "approving thresholds"}


def reply_marker(key: str) -> str:
    """The hidden marker of the reply to ``key`` (delivery id and command line)."""
    return f"<!-- threshold-bot:reply {escape(key, 120)} -->"


def mention(login: str) -> str:
    """``@login`` for a well-formed GitHub login, else the escaped text (no mention)."""
    return f"@{login}" if _LOGIN.match(login) else str(escape(login, 60))


def refusal(login: str, action: str, required: str, level: str) -> str:
    """A polite refusal naming the permission ``action`` needs."""
    what = ACTIONS.get(action, escape(action))
    return (
        f"Sorry {mention(login)}, {what} needs **{escape(required)}** permission on this "
        f"repository, and yours is **{escape(level)}**. A maintainer can do it for you."
    )


def problems(found: Sequence[CommandProblem]) -> str:
    """What was wrong with the commands of a comment, with a pointer to the help."""
    lines = ["I could not understand this:", ""]
    for problem in found:
        lines.append(f"- line {problem.line}: {code(problem.text)}: {escape(problem.message)}")
    lines += ["", "`/threshold-bot help` lists the commands and options."]
    return "\n".join(lines)


def retry_later(until: datetime, cooldown_seconds: float) -> str:
    """The answer to ``/threshold-bot retry`` within the cooldown: when it may run again
    (``until``, in UTC, rounded up to the second)."""
    seconds = f"{cooldown_seconds:g} second{'' if cooldown_seconds == 1 else 's'}"
    at = until.replace(microsecond=0) + timedelta(seconds=1 if until.microsecond else 0)
    return (
        f"`/threshold-bot retry` reviews a PR at most once every {seconds}, and this PR's last "
        f"retry is more recent: nothing was reviewed now. Retry at {iso_date_time(at)} UTC "
        "or later."
    )
