"""Broker tokens at rest: MultiFernet over TOKEN_ENCRYPTION_KEYS (newest key first).

Rotation: put the new key first in TOKEN_ENCRYPTION_KEY, restart, run
`manage.py rotate_token_keys` (re-encrypts with the newest key), then drop the old key.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from recovery.tokens import TokenEncryptionNotConfigured


def token_cipher() -> MultiFernet:
    """Return the cipher for broker tokens; fail with a named error when no key is configured."""
    keys = [key for key in getattr(settings, "TOKEN_ENCRYPTION_KEYS", []) if key]
    if not keys:
        raise TokenEncryptionNotConfigured(
            "TOKEN_ENCRYPTION_KEY is not set: set it to one or more Fernet keys "
            "(comma-separated, newest first) to store broker tokens"
        )
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as exc:
        raise TokenEncryptionNotConfigured(f"TOKEN_ENCRYPTION_KEY holds an invalid Fernet key: {exc}") from None


def encrypt_token(secret: str) -> str:
    return token_cipher().encrypt(secret.encode()).decode()


class TokenDecryptionFailed(Exception):
    """The stored ciphertext matches none of the configured keys (a key was dropped too early)."""


def decrypt_token(ciphertext: str) -> str:
    try:
        return token_cipher().decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        raise TokenDecryptionFailed(
            "stored broker token cannot be decrypted with TOKEN_ENCRYPTION_KEY: was its key removed?"
        ) from None


def reencrypt_token(ciphertext: str) -> str:
    """Return `ciphertext` re-encrypted under the newest key."""
    try:
        return token_cipher().rotate(ciphertext.encode()).decode()
    except InvalidToken:
        raise TokenDecryptionFailed("stored broker token cannot be decrypted with TOKEN_ENCRYPTION_KEY") from None
