"""Tokens at rest and in logs: MultiFernet encryption, redacting wrapper, log filter."""

from __future__ import annotations

import logging
import pickle

import pytest
from cryptography.fernet import Fernet

from recovery.encryption import TokenDecryptionFailed, decrypt_token, encrypt_token, reencrypt_token
from recovery.redaction import REDACTED, RedactTokensFilter, redact, register_secret
from recovery.tokens import AccessToken, TokenEncryptionNotConfigured

SECRET = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJBQjEyMzQifQ.c2lnbmF0dXJlLXZhbHVl"


def test_token_round_trips_and_the_ciphertext_does_not_contain_it(settings) -> None:
    settings.TOKEN_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    ciphertext = encrypt_token(SECRET)
    assert SECRET not in ciphertext
    assert decrypt_token(ciphertext) == SECRET


def test_key_rotation_reads_old_ciphertexts_and_rewrites_them_under_the_new_key(settings) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.TOKEN_ENCRYPTION_KEYS = [old]
    ciphertext = encrypt_token(SECRET)
    settings.TOKEN_ENCRYPTION_KEYS = [new, old]
    assert decrypt_token(ciphertext) == SECRET
    rotated = reencrypt_token(ciphertext)
    settings.TOKEN_ENCRYPTION_KEYS = [new]
    assert decrypt_token(rotated) == SECRET
    with pytest.raises(TokenDecryptionFailed):
        decrypt_token(ciphertext)


def test_no_encryption_key_is_a_named_error(settings) -> None:
    settings.TOKEN_ENCRYPTION_KEYS = []
    with pytest.raises(TokenEncryptionNotConfigured, match="TOKEN_ENCRYPTION_KEY"):
        encrypt_token(SECRET)


def test_access_token_never_prints_itself() -> None:
    token = AccessToken(SECRET)
    for rendered in (repr(token), str(token), f"{token}", "%s" % token, f"{token!r:>80}"):
        assert SECRET not in rendered
        assert token.fingerprint in rendered
    assert token.reveal() == SECRET
    assert token.authorization_header() == f"Bearer {SECRET}"
    with pytest.raises(TypeError):
        pickle.dumps(token)


def record(message: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc else None
    return logging.LogRecord("t", logging.INFO, __file__, 1, message, args, exc_info)


def test_log_filter_redacts_registered_and_token_shaped_secrets() -> None:
    registered = "opaque-registered-token-value-42"
    register_secret(registered)
    cases = [
        record("got %s", registered),
        record("headers: Authorization: Bearer abcdefghijklmnop"),
        record("body %s", f'{{"access_token": "{SECRET}", "user_id": "AB1"}}'),
        record("form code=x&client_secret=hunter2hunter2&grant_type=authorization_code"),
        record("jwt %s in text", SECRET),
    ]
    log_filter = RedactTokensFilter()
    for item in cases:
        assert log_filter.filter(item)
        message = item.getMessage()
        assert REDACTED in message
        for secret in (registered, SECRET, "abcdefghijklmnop", "hunter2hunter2"):
            assert secret not in message
    assert "AB1" in cases[2].getMessage()  # only the secret goes


def test_log_filter_redacts_exception_text() -> None:
    try:
        raise RuntimeError(f"request failed with Bearer {SECRET}")
    except RuntimeError as exc:
        item = record("boom", exc=exc)
    RedactTokensFilter().filter(item)
    assert item.exc_text and SECRET not in item.exc_text


def test_redact_leaves_ordinary_text_alone() -> None:
    text = "feed upstox: redial after 2.5s (NSE_EQ|INE848E01016)"
    assert redact(text) == text


def test_console_handler_is_configured_with_the_redaction_filter() -> None:
    handlers = [h for h in logging.getLogger().handlers if any(isinstance(f, RedactTokensFilter) for f in h.filters)]
    assert handlers, "settings.LOGGING must attach recovery.redaction.RedactTokensFilter to the console handler"
