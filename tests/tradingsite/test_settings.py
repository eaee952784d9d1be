"""Settings load in both configurations, and refuse to run insecurely."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'], 'name': str(s.DATABASES['default']['NAME']), "
    "'layer': s.CHANNEL_LAYERS['default']['BACKEND'], 'broker': s.CELERY_BROKER_URL, "
    "'eager': s.CELERY_TASK_ALWAYS_EAGER, 'debug': s.DEBUG, 'hosts': s.ALLOWED_HOSTS, "
    "'keys': len(s.TOKEN_ENCRYPTION_KEYS)}))"
)
SERVICE_VARS = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "TOKEN_ENCRYPTION_KEY")


def run_python(code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    clean.update({"DJANGO_SETTINGS_MODULE": "tradingsite.settings", "VAR_DIR": str(tmp_path / "var"), **env})
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60)


def test_embedded_default_uses_sqlite_in_memory_layer_and_local_secrets(tmp_path: Path) -> None:
    result = run_python(PROBE, {}, tmp_path)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert loaded["engine"] == "django.db.backends.sqlite3"
    assert loaded["name"] == str(tmp_path / "var" / "db.sqlite3")
    assert loaded["layer"] == "channels.layers.InMemoryChannelLayer"
    assert loaded["eager"] is True
    assert loaded["keys"] == 1
    # Generated once, then reused by the next start.
    secret = (tmp_path / "var" / "secret_key").read_text()
    assert len(secret) >= 50
    assert run_python(PROBE, {}, tmp_path).returncode == 0
    assert (tmp_path / "var" / "secret_key").read_text() == secret


def test_scale_out_uses_postgres_redis_layer_and_celery_broker(tmp_path: Path) -> None:
    env = {"DATABASE_URL": "postgres://u:p@db.internal:5432/trading", "REDIS_URL": "redis://cache.internal:6379/1"}
    result = run_python(PROBE, env, tmp_path)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert loaded["engine"] == "django.db.backends.postgresql"
    assert loaded["name"] == "trading"
    assert loaded["layer"] == "channels_redis.core.RedisChannelLayer"
    assert loaded["broker"] == "redis://cache.internal:6379/1"
    assert loaded["eager"] is False


def test_missing_secret_key_with_debug_off_fails_with_a_named_error(tmp_path: Path) -> None:
    result = run_python(PROBE, {"DEBUG": "0"}, tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY is required when DEBUG is off" in result.stderr
    assert not (tmp_path / "var" / "secret_key").exists()


PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "k" * 20 + "-production-secret-key-with-enough-entropy-5b1c9e",
    "ALLOWED_HOSTS": "trading.example.com",
    "TOKEN_ENCRYPTION_KEY": "ZmDfcTF7_60GrrY167zsiPd67pEvs0aGOv2oasOM1Pg=",
}


def test_check_deploy_is_clean_when_configured_for_production(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    clean.update({"VAR_DIR": str(tmp_path / "var"), **PRODUCTION})
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("bad", ["DEBUG", "SECRET_KEY"])
def test_check_deploy_flags_an_insecure_configuration(tmp_path: Path, bad: str) -> None:
    env = dict(PRODUCTION)
    if bad == "DEBUG":
        env["DEBUG"] = "1"
    else:
        env["SECRET_KEY"] = "short"
    clean = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    clean.update({"VAR_DIR": str(tmp_path / "var"), **env})
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
