"""Repository registrations and file links (pure parts of knowledge.ingest.repos)."""

from __future__ import annotations

import json

import pytest

from knowledge.core.errors import ValidationError
from knowledge.ingest.repos.links import file_url
from knowledge.ingest.repos.registration import RepoRegistration

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/o/r.git", f"https://github.com/o/r/blob/{SHA}/docs/a%20b.md"),
        ("ssh://git@github.com/o/r.git", f"https://github.com/o/r/blob/{SHA}/docs/a%20b.md"),
        ("https://gitlab.com/g/s/r", f"https://gitlab.com/g/s/r/-/blob/{SHA}/docs/a%20b.md"),
        (
            "https://gitlab.example.com/g/r.git",
            f"https://gitlab.example.com/g/r/-/blob/{SHA}/docs/a%20b.md",
        ),
        ("https://git.example.com/g/r.git", None),
        ("https://bitbucket.org/o/r.git", f"https://bitbucket.org/o/r/src/{SHA}/docs/a%20b.md"),
        ("http://127.0.0.1:8080/team/docs.git", "http://127.0.0.1:8080/team/docs/docs/a%20b.md"),
    ],
)
def test_file_url_per_host_style(url: str, expected: str | None) -> None:
    got = file_url(url, SHA, "docs/a b.md")
    if expected is None:  # a self-hosted host without a known style: repository URL + path
        assert got == "https://git.example.com/g/r/docs/a%20b.md"
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # Bitbucket Server / Data Center: clone under /scm/, browse under /projects/.
        (
            "https://bitbucket.acme.com/scm/OPS/runbooks.git",
            f"https://bitbucket.acme.com/projects/OPS/repos/runbooks/browse/docs/a%20b.md?at={SHA}",
        ),
        (
            "ssh://git@bitbucket.acme.com:7999/ops/runbooks.git",
            f"https://bitbucket.acme.com/projects/ops/repos/runbooks/browse/docs/a%20b.md?at={SHA}",
        ),
        # Azure DevOps: the path and the commit are query parameters.
        (
            "https://dev.azure.com/acme/ops/_git/runbooks",
            f"https://dev.azure.com/acme/ops/_git/runbooks?path=/docs/a%20b.md&version=GC{SHA}",
        ),
        (
            "ssh://git@ssh.dev.azure.com/v3/acme/ops/runbooks",
            f"https://dev.azure.com/acme/ops/_git/runbooks?path=/docs/a%20b.md&version=GC{SHA}",
        ),
        # Gitea / Forgejo (Codeberg) and sourcehut.
        (
            "https://codeberg.org/o/r.git",
            f"https://codeberg.org/o/r/src/commit/{SHA}/docs/a%20b.md",
        ),
        (
            "https://gitea.acme.com/o/r.git",
            f"https://gitea.acme.com/o/r/src/commit/{SHA}/docs/a%20b.md",
        ),
        ("https://git.sr.ht/~o/r", f"https://git.sr.ht/~o/r/tree/{SHA}/item/docs/a%20b.md"),
        # An SSH URL's port is the SSH server's, never the web page's.
        ("ssh://git@gitlab.com:2222/g/r.git", f"https://gitlab.com/g/r/-/blob/{SHA}/docs/a%20b.md"),
    ],
)
def test_file_url_of_other_well_known_hosts(url: str, expected: str) -> None:
    assert file_url(url, SHA, "docs/a b.md") == expected


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "https://h/o/r.git"}, "name"),
        ({"name": ".hidden", "url": "https://h/o/r.git"}, "name"),
        ({"name": "r"}, "url"),
        ({"name": "r", "url": "file:///etc/repo"}, "url"),
        ({"name": "r", "url": "https://user:tok@h/o/r.git"}, "url"),
        ({"name": "r", "url": "https://tok@h/o/r.git"}, "url"),
        ({"name": "r", "url": "https://h/"}, "url"),
        ({"name": "r", "url": "ssh://git@h/o/r.git"}, "known_hosts"),
        ({"name": "r", "url": "https://h/o/r.git", "branch": "a..b"}, "branch"),
        ({"name": "r", "url": "https://h/o/r.git", "paths": ["../up"]}, "paths"),
        ({"name": "r", "url": "https://h/o/r.git", "paths": ["docs\x85"]}, "paths"),
        ({"name": "r", "url": "https://h/o/r.git", "paths": ["docs\x7f"]}, "paths"),
        ({"name": "r", "url": "https://h/o/r.git", "credential": "ghp_rawtoken"}, "credential"),
        ({"name": "r", "url": "https://h/o/r.git", "credential": "file:relative"}, "credential"),
        ({"name": "r", "url": "https://h/o/r.git", "token": "x"}, "token"),
        # A token over plain http:// would cross the network in clear.
        ({"name": "r", "url": "http://git.example.com/o/r", "credential": "env:T"}, "credential"),
        ({"name": "r", "url": "http://10.0.0.5:8080/o/r", "credential": "env:T"}, "credential"),
    ],
)
def test_bad_registrations_name_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RepoRegistration.from_request(body)
    assert caught.value.field == field


def test_arn_credentials_only_where_accepted_and_never_shown() -> None:
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kb-repo/docs-AbCdEf"
    body = {"name": "r", "url": "https://h/o/r.git", "credential": arn}
    with pytest.raises(ValidationError):
        RepoRegistration.from_request(body)
    registration = RepoRegistration.from_request(body, credential_kinds=("arn",))
    assert registration.credential == arn
    assert registration.public()["credential"] == "arn"
    assert arn not in str(registration.public())
    assert RepoRegistration.from_stored(registration.to_dict()) == registration


def test_an_ssh_secret_is_the_key_or_json_with_the_key_and_known_hosts() -> None:
    from knowledge.ingest.repos.fetch import RepoSyncError
    from knowledge.ingest.repos.ssh import ssh_identity

    pem = b"-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
    assert ssh_identity(pem) == (pem, None)
    assert ssh_identity(None) == (None, None)
    pinned = json.dumps({"private_key": pem.decode(), "known_hosts": "h ssh-ed25519 AAAA"})
    assert ssh_identity(pinned.encode()) == (pem, "h ssh-ed25519 AAAA")
    assert ssh_identity(json.dumps({"private_key": pem.decode()}).encode()) == (pem, None)
    for bad in (
        b"{not json",
        b'{"key": "x"}',
        b'{"private_key": "k", "known_hosts": 3}',
        b'{"private_key": "k", "passphrase": "p"}',
    ):
        with pytest.raises(RepoSyncError) as refused:
            ssh_identity(bad)
        assert refused.value.kind == "credential"


def test_known_hosts_may_be_left_to_the_secret_only_with_a_secret_arn() -> None:
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kb-repo/docs-AbCdEf"
    url = "ssh://git@h/o/r.git"
    registration = RepoRegistration.from_request(
        {"name": "r", "url": url, "credential": arn}, credential_kinds=("arn",)
    )
    assert registration.known_hosts is None
    with pytest.raises(ValidationError) as refused:
        RepoRegistration.from_request({"name": "r", "url": url, "credential": "file:/k"})
    assert refused.value.field == "known_hosts"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/o/r.git",
        "http://localhost/o/r.git",
        "http://[::1]:9418/o/r.git",
        "https://git.example.com/o/r.git",
    ],
)
def test_a_credential_goes_over_tls_or_stays_on_the_machine(url: str) -> None:
    registration = RepoRegistration.from_request({"name": "r", "url": url, "credential": "env:T"})
    assert registration.credential == "env:T"


def test_a_credential_on_plain_http_is_refused_with_a_message_saying_why() -> None:
    with pytest.raises(ValidationError) as caught:
        RepoRegistration.from_request(
            {"name": "r", "url": "http://git.example.com/o/r.git", "credential": "env:T"}
        )
    assert "https://" in caught.value.message
    assert "clear" in caught.value.message
    # Without a credential plain http:// stays accepted (a public mirror).
    assert RepoRegistration.from_request({"name": "r", "url": "http://git.example.com/o/r.git"})


def test_a_stored_registration_never_sends_its_token_over_plain_http(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registration kept from before http:// with a credential was refused: its sync
    fails on the credential before any connection, and the token is never sent."""
    from knowledge.core.scope import KnowledgeScope
    from knowledge.ingest.repos.state import RepoRegistry
    from knowledge.ingest.repos.storage import FolderStorage
    from knowledge.ingest.repos.sync import sync_repository

    scope = KnowledgeScope("a", "c")
    registry = RepoRegistry(FolderStorage(tmp_path))
    stored = RepoRegistration.from_stored(
        {"name": "r", "url": "http://git.invalid/o/r.git", "credential": "env:KB_T"}
    )
    registry.add(scope, stored)
    monkeypatch.setenv("KB_T", "tok")
    report = sync_repository(registry, scope, stored)
    assert report.error is not None
    assert report.error["kind"] == "credential"
    assert "https://" in report.error["message"]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("git@github.com:acme/runbooks.git", "ssh://git@github.com/acme/runbooks.git"),
        ("git@gitlab.example.com:g/sub/r.git", "ssh://git@gitlab.example.com/g/sub/r.git"),
    ],
)
def test_an_scp_like_ssh_address_is_taken_as_its_ssh_url(given: str, stored: str) -> None:
    """The address a Git host shows under "Clone with SSH" (``git@host:owner/repo``)."""
    registration = RepoRegistration.from_request(
        {"name": "r", "url": given, "known_hosts": "github.com ssh-ed25519 AAAA"}
    )
    assert registration.url == stored
    assert registration.is_ssh


@pytest.mark.parametrize("url", ["git@github.com:", "git@:acme/r.git", "C:/repos/r.git"])
def test_what_is_not_an_scp_like_address_stays_refused(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RepoRegistration.from_request({"name": "r", "url": url, "known_hosts": "h k A"})
    assert caught.value.field == "url"
