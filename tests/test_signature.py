"""HMAC-SHA256 webhook signatures: GitHub's documented example, rotation, refusals."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from bot.core.signature import sign, verify


def test_github_documented_example() -> None:
    # From GitHub's "Validating webhook deliveries" docs: secret "It's a Secret to Everybody",
    # payload "Hello, World!".
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign(b"Hello, World!", b"It's a Secret to Everybody") == expected
    assert verify(b"Hello, World!", expected, [b"It's a Secret to Everybody"])


def test_any_of_several_secrets_is_accepted() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    old, new = b"old-secret", b"new-secret"
    assert verify(body, sign(body, old), [new, old])
    assert verify(body, sign(body, new), [new, old])
    assert not verify(body, sign(body, b"other"), [new, old])


def test_refusals() -> None:
    body, secret = b"{}", b"s3cret"
    good = sign(body, secret)
    digest_sha1 = hmac.new(secret, body, hashlib.sha1).hexdigest()
    digest_sha512 = hmac.new(secret, body, hashlib.sha512).hexdigest()
    assert not verify(body, f"sha1={digest_sha1}", [secret])
    assert not verify(body, f"sha512={digest_sha512}", [secret])
    assert not verify(body, good.removeprefix("sha256="), [secret])  # no algorithm prefix
    assert not verify(body, good[:-2], [secret])  # truncated
    assert not verify(body, good[:-1] + "z", [secret])  # not hex
    assert not verify(body, "", [secret])
    assert not verify(body, good, [])  # no secret configured accepts nothing
    assert not verify(body + b" ", good, [secret])  # body changed after signing


def test_hex_case_and_surrounding_space_do_not_matter() -> None:
    body, secret = b"[1, 2]", b"k"
    digest = sign(body, secret).removeprefix("sha256=")
    assert verify(body, f"sha256={digest.upper()}", [secret])
    assert verify(body, f" sha256={digest} ", [secret])


@given(body=st.binary(max_size=512), secret=st.binary(min_size=1, max_size=64), flip=st.integers())
def test_signature_round_trip_and_tamper(body: bytes, secret: bytes, flip: int) -> None:
    header = sign(body, secret)
    assert verify(body, header, [secret])
    if body:
        i = flip % len(body)
        tampered = body[:i] + bytes([body[i] ^ 0x01]) + body[i + 1 :]
        assert not verify(tampered, header, [secret])
