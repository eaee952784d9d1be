"""One logging configuration: every record, django.* included, passes the token
redaction filter and prints once, with DEBUG on or off. A fresh process, so Django's
own logging setup (DEFAULT_LOGGING, then LOGGING) runs exactly as in the site."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECRET = "plaintext-broker-token-0123456789"
PROGRAM = f"""
import logging
import django

django.setup()
from recovery.redaction import register_secret

register_secret({SECRET!r})
logging.getLogger("django.request").error("upstream answered %s", {SECRET!r})
logging.getLogger("django.server").error("GET /recovery/callback/upstox?code={SECRET}")
logging.getLogger("django.db.backends").warning("params: access_token=abcdefgh12345678")
logging.getLogger("recovery.upstox").info("Authorization: Bearer abcdefgh12345678abcdefgh")
try:
    raise RuntimeError("token was {SECRET}")
except RuntimeError:
    logging.getLogger("django.security.csrf").exception("failed")
"""


@pytest.mark.parametrize("debug", ["1", "0"])
def test_no_secret_reaches_the_log_and_each_record_prints_once(debug: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tradingsite.settings",
            "DEBUG": debug,
            "SECRET_KEY": "test-secret-key-not-for-production-" + "x" * 20,
            "VAR_DIR": str(tmp_path),
            "LOG_LEVEL": "INFO",
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    output = result.stdout + result.stderr
    assert "upstream answered" in output  # the records were logged at all
    for leaked in (SECRET, "abcdefgh12345678"):
        assert leaked not in output, output
    assert output.count("upstream answered") == 1, output
    assert output.count("GET /recovery/callback/upstox") == 1, output
    assert output.count("RuntimeError") == 1, output
    assert output.count("[REDACTED]") >= 5, output
