"""Webhook signatures: HMAC-SHA256 of the raw body, as GitHub sends in ``X-Hub-Signature-256``.

Only ``sha256=<64 hex digits>`` is accepted; the legacy SHA-1 header and any other
algorithm are refused.  Every configured secret is tried (secret rotation) with a
constant-time comparison, and all of them are always tried so the time taken does
not reveal which one matched.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence

HEADER = "X-Hub-Signature-256"
_FORMAT = re.compile(r"^sha256=([0-9a-fA-F]{64})$")


def sign(body: bytes, secret: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub would send for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(body: bytes, header: str, secrets: Sequence[bytes]) -> bool:
    """Whether ``header`` is a valid SHA-256 signature of ``body`` under any of ``secrets``."""
    match = _FORMAT.match(header.strip())
    if match is None or not secrets:
        return False
    given = bytes.fromhex(match.group(1))
    matched = False
    for secret in secrets:
        expected = hmac.new(secret, body, hashlib.sha256).digest()
        matched |= hmac.compare_digest(expected, given)
    return matched
