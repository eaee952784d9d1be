"""A logging filter that removes broker tokens from log records.

Recovery code never logs a token on purpose; this filter is the second line, for a
third-party library or a careless `log.info("%s", response.text)`. It redacts tokens
this process has seen (registered when decrypted, received or read from a file) and
anything shaped like one: bearer headers, JWTs, and access_token / client_secret fields.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict

REDACTED = "[REDACTED]"
# Bounded: a long-running process sees a new token a day per broker, not thousands.
_MAX_KNOWN_SECRETS = 256
_known: OrderedDict[str, None] = OrderedDict()
_known_lock = threading.Lock()

_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    re.compile(r"""(?i)((?:access_token|extended_token|client_secret|refresh_token)["']?\s*[:=]\s*["']?)[^"'&\s,}]+"""),
)


def register_secret(secret: str) -> None:
    """Remember `secret` so that any later log line containing it is redacted."""
    if len(secret) < 8:
        return
    with _known_lock:
        _known[secret] = None
        _known.move_to_end(secret)
        while len(_known) > _MAX_KNOWN_SECRETS:
            _known.popitem(last=False)


def redact(text: str) -> str:
    """Return `text` without known or token-shaped secrets."""
    with _known_lock:
        known = list(_known)
    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


class RedactTokensFilter(logging.Filter):
    """Rewrite each record's message (and exception text) with secrets redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
