"""MLflow failures told in our own words, and tracking URIs as a review may show them.

MLflow's exception texts carry the server's response body and the URL requested, which may
name internal hosts or hold data: the adapter logs them, and a review shows only what
``failure_reason`` derives: the HTTP status, MLflow's error code (a name of its fixed
enum), or the kind of network failure.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_DENIED = ("UNAUTHENTICATED", "PERMISSION_DENIED")


def shown(uri: str) -> str:
    """``uri`` without user name, password, query or fragment."""
    parts = urlsplit(uri.strip())
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host, query="", fragment="").geturl()


def failure_reason(exc: BaseException, *, own_server: bool) -> str:
    """Why an MLflow request failed, never quoting the server; ``own_server``: the
    request went to ``MLFLOW_TRACKING_URI`` (the only server given credentials)."""
    from mlflow.exceptions import RestException

    code = str(getattr(exc, "error_code", "") or "")
    if code in _DENIED:
        if own_server:
            return (
                f"access denied ({code}); check MLFLOW_TRACKING_TOKEN (or "
                "MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD) on the server"
            )
        return (
            f"access denied ({code}); the App sends MLflow credentials only to MLFLOW_TRACKING_URI"
        )
    if isinstance(exc, RestException):  # a JSON error body: its message is the server's
        return f"the MLflow server answered with error {code}"
    return _transport_reason(str(exc))


def _transport_reason(text: str) -> str:
    """The reason in MLflow's, requests' and urllib3's own message templates."""
    retried = re.search(r"too many (\d{3}) error responses", text)
    if retried:
        return f"the MLflow server answered HTTP {retried.group(1)} (after retries)"
    status = re.search(r"failed with error code (\d{3}) != \d{3}", text)
    if status:
        return f"the MLflow server answered HTTP {status.group(1)}"
    lowered = text.lower()
    if "timeout" in lowered or "timed out" in lowered:
        return "the MLflow server did not answer in time"
    if "ssl" in lowered or "certificate" in lowered:
        return "the TLS connection to the MLflow server failed"
    if "connection refused" in lowered:
        return "the MLflow server could not be reached (connection refused)"
    if "resolve" in lowered or "name or service not known" in lowered:
        return "the MLflow server could not be reached (host name not found)"
    if "connection" in lowered:
        return "the MLflow server could not be reached"
    if "not in a valid json format" in lowered:
        return "the MLflow server's answer was not MLflow's JSON"
    return "the request to the MLflow server failed (details in the App's log)"
