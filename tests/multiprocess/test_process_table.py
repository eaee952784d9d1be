"""The Procfile, compose.yaml and the README name the same processes with the same arguments."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.multiprocess.stack import procfile

ROOT = Path(__file__).resolve().parents[2]
# compose service -> Procfile process type
SERVICES = {"release": "release", "web1": "web", "web2": "web", "feed": "feed", "worker": "worker", "beat": "beat"}
DEFAULTS = re.compile(r"\$\{(\w+):-([^}]*)\}")


def normalized(command: str) -> str:
    """A command with ${VAR:-default} as its default and single spaces."""
    return " ".join(DEFAULTS.sub(lambda m: m.group(2), command).split())


def compose_command(service: dict[str, object]) -> str:
    command = service["command"]
    assert isinstance(command, list)
    if command[:2] == ["sh", "-c"]:
        return normalized(str(command[2]))
    return normalized(" ".join(str(part) for part in command))


def test_the_procfile_has_every_process_type() -> None:
    assert set(procfile()) == {"release", "web", "feed", "worker", "beat"}


def test_compose_runs_each_procfile_line() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    entries = {name: normalized(command) for name, command in procfile().items()}
    for service, kind in SERVICES.items():
        assert compose_command(services[service]) == entries[kind], service
    assert {"db", "redis", "proxy"} <= set(services)


def test_the_readme_runs_each_procfile_line() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("## Scale-out: PostgreSQL + Redis") :]
    block = block[block.index("```sh") : block.index("```", block.index("```sh") + 5)]
    lines = {normalized(line.split("  #", 1)[0]) for line in block.splitlines()}
    for kind, command in procfile().items():
        expected = normalized(command)
        if kind == "web":
            ports = [line for line in lines if re.fullmatch(re.escape(expected).replace("8000", r"\d+"), line)]
            assert len(ports) >= 2, f"the README starts two web processes with: {expected}"
        else:
            assert expected in lines, f"the README's scale-out block lacks the Procfile's {kind}: {expected}"


def test_the_image_installs_from_the_lock_and_runs_unprivileged() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install -r requirements.txt -c requirements.lock" in dockerfile
    assert "npm ci" in dockerfile and "collectstatic" in dockerfile
    assert re.search(r"^USER (?!root)\w+", dockerfile, re.M)
    assert "X-Forwarded-Proto" in (ROOT / "deploy" / "Caddyfile").read_text()
