"""Repository registrations and file links (pure parts of knowledge.ingest.repos)."""

from __future__ import annotations

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
        ({"name": "r", "url": "https://h/o/r.git", "credential": "ghp_rawtoken"}, "credential"),
        ({"name": "r", "url": "https://h/o/r.git", "credential": "file:relative"}, "credential"),
        ({"name": "r", "url": "https://h/o/r.git", "token": "x"}, "token"),
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
