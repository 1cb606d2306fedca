"""The AWS SAM CLI in its own virtualenv, and the Python 3.12 that ``sam build`` needs.

Standard library only, so that the Makefile can run it with any Python 3::

    python3 tests/support/sam_cli.py install    # create .venv-sam (pinned SAM CLI)
    python3 tests/support/sam_cli.py validate   # sam validate --lint
    python3 tests/support/sam_cli.py build      # sam build (layer + functions)

and ``tests/integration/aws/test_sam.py`` imports it. The SAM CLI's pinned dependencies
conflict with the project's, so it lives in ``.venv-sam``, installed from PyPI with the
version pinned in ``tools/sam-cli/requirements.txt``.

``sam build`` with ``BuildMethod: python3.12`` runs ``python3.12`` from ``PATH``. It is
looked up on ``PATH`` (a pyenv shim counts only if it really runs 3.12), then through
``pyenv`` (``pyenv prefix 3.12``, then ``versions/3.12*`` under ``pyenv root``,
``$PYENV_ROOT`` or ``~/.pyenv``, for a machine where pyenv is not on PATH). If there is none,
that is an error that says how to install one; it is never skipped silently.

Telemetry is off (``SAM_CLI_TELEMETRY=0``) and no AWS account is needed: ``validate
--lint`` and ``build`` work offline from AWS (``build`` downloads the layer's
dependencies from PyPI). A region is set because some SAM code paths want one.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = [
    "REPO_ROOT",
    "SAM_REQUIREMENTS",
    "SAM_VENV",
    "SamCliError",
    "ensure_sam_cli",
    "find_python312_bin_dir",
    "run_sam",
    "sam_environment",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SAM_VENV = REPO_ROOT / ".venv-sam"
SAM_REQUIREMENTS = REPO_ROOT / "tools" / "sam-cli" / "requirements.txt"
_STAMP = SAM_VENV / ".installed"
INSTALL_TIMEOUT_S = 600.0
SAM_TIMEOUT_S = 600.0


class SamCliError(RuntimeError):
    """The SAM CLI could not be installed, or a prerequisite (python3.12) is missing."""


def _sam_executable() -> Path:
    return SAM_VENV / "bin" / "sam"


def _installed_requirements_current() -> bool:
    if not (_STAMP.is_file() and _sam_executable().is_file()):
        return False
    return _STAMP.read_text(encoding="utf-8") == SAM_REQUIREMENTS.read_text(encoding="utf-8")


def ensure_sam_cli(python: str | None = None) -> Path:
    """Create ``.venv-sam`` with the pinned SAM CLI unless it is already there; return the
    ``sam`` executable. Raises ``SamCliError`` with pip's output when installing fails."""
    if _installed_requirements_current():
        return _sam_executable()
    venv_python = SAM_VENV / "bin" / "python"
    steps = []
    if not venv_python.is_file():
        steps.append([python or sys.executable, "-m", "venv", str(SAM_VENV)])
    steps.append([str(venv_python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    steps.append([str(venv_python), "-m", "pip", "install", "--quiet", "-r", str(SAM_REQUIREMENTS)])
    for command in steps:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            raise SamCliError(
                f"installing the SAM CLI failed: {' '.join(command)}\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
    # Keep the whole venv out of git, as Python 3.13's venv does by itself.
    (SAM_VENV / ".gitignore").write_text("*\n", encoding="utf-8")
    _STAMP.write_text(SAM_REQUIREMENTS.read_text(encoding="utf-8"), encoding="utf-8")
    return _sam_executable()


def _runs_python312(executable: str) -> bool:
    try:
        done = subprocess.run(
            [executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == "3.12"


def _pyenv(*args: str) -> str | None:
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return None
    try:
        done = subprocess.run(
            [pyenv, *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def find_python312_bin_dir() -> Path:
    """A folder whose ``python3.12`` really is Python 3.12 (module docstring).

    Raises ``SamCliError`` saying how to install one when there is none.
    """
    candidates: list[Path] = []
    on_path = shutil.which("python3.12")
    if on_path is not None:  # a pyenv shim counts only if it runs 3.12 (probed below)
        candidates.append(Path(on_path).parent)
    prefix = _pyenv("prefix", "3.12")
    if prefix is not None:
        candidates.append(Path(prefix.splitlines()[0]) / "bin")
    roots = [_pyenv("root"), os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    for root in dict.fromkeys(r for r in roots if r):
        for found in sorted(
            glob.glob(os.path.join(root, "versions", "3.12*", "bin")), reverse=True
        ):
            candidates.append(Path(found))
    for folder in candidates:
        executable = folder / "python3.12"
        if executable.is_file() and _runs_python312(str(executable)):
            return folder
    raise SamCliError(
        "sam build needs python3.12 (the layer's BuildMethod is python3.12) and none was "
        "found on PATH or through pyenv; install one, e.g. `pyenv install 3.12` or your "
        "system's python3.12 package, then run again"
    )


def sam_environment(*, with_python312: bool = False) -> dict[str, str]:
    """The environment SAM runs in: telemetry off, a region, python3.12 first on PATH."""
    env = dict(os.environ)
    env["SAM_CLI_TELEMETRY"] = "0"
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    env.setdefault("AWS_REGION", env["AWS_DEFAULT_REGION"])
    if with_python312:
        env["PATH"] = f"{find_python312_bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_sam(
    *args: str, cwd: Path = REPO_ROOT, with_python312: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``sam ARGS`` (installing the CLI first if needed); the result is returned, not
    checked, so callers can assert on failures too."""
    sam = ensure_sam_cli()
    return subprocess.run(
        [str(sam), *args],
        cwd=cwd,
        env=sam_environment(with_python312=with_python312),
        capture_output=True,
        text=True,
        timeout=SAM_TIMEOUT_S,
        check=False,
    )


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else ""
    try:
        if command == "install":
            print(ensure_sam_cli())
            return 0
        if command == "validate":
            done = run_sam("validate", "--lint")
        elif command == "build":
            done = run_sam("build", with_python312=True)
        else:
            print("usage: sam_cli.py install|validate|build", file=sys.stderr)
            return 2
    except SamCliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
