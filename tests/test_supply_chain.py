"""The environment holds no compromised litellm release and no stray startup hook."""

from __future__ import annotations

import site
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

# litellm 1.82.7 and 1.82.8 shipped a credential stealer (via litellm_init.pth); 1.107.0 is
# reported too. pyproject.toml excludes them; this checks what is actually installed.
COMPROMISED = {Version("1.82.7"), Version("1.82.8"), Version("1.107.0")}


def test_installed_litellm_is_not_a_compromised_release() -> None:
    assert Version(metadata.version("litellm")) not in COMPROMISED


def test_project_excludes_the_compromised_releases() -> None:
    requirements = [Requirement(r) for r in metadata.requires("agenttrace-otel") or []]
    litellm = next(r for r in requirements if r.name == "litellm")
    for version in COMPROMISED:
        assert not litellm.specifier.contains(version), version


def test_no_litellm_init_pth_anywhere_on_the_path() -> None:
    places = {
        Path(p) for p in [*site.getsitepackages(), site.getusersitepackages(), *sys.path] if p
    }
    found = [str(p / "litellm_init.pth") for p in places if (p / "litellm_init.pth").exists()]
    assert found == []
    pth_hooks = [
        str(pth) for p in places if p.is_dir() for pth in p.glob("*.pth") if "litellm" in pth.name
    ]
    assert pth_hooks == []


def test_lock_pins_every_package_with_hashes() -> None:
    lock = (Path(__file__).resolve().parent.parent / "requirements.lock").read_text()
    entries = [line for line in lock.splitlines() if line and line[0].isalpha()]
    assert entries, "empty lock"
    assert all("==" in line for line in entries)
    assert lock.count("--hash=sha256:") >= len(entries)
    litellm = next(line for line in entries if line.startswith("litellm=="))
    assert Version(litellm.split("==")[1].split()[0]) not in COMPROMISED
