"""The tenant scope: segment rules, messages, and object keys, with literal expectations."""

from __future__ import annotations

import pytest

from knowledge.core.errors import InvalidScopeError, ValidationError
from knowledge.core.scope import KnowledgeScope, ScopedKey, parse_object_key, validate_segment

# --- validate_segment ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["a", "A", "0", "ops-bot", "runbooks_2024", "v1.2", "...", ".hidden", "a" * 64, "-_."],
)
def test_valid_segments_are_returned_unchanged(value: str) -> None:
    assert validate_segment("agent", value) is value


@pytest.mark.parametrize("value", [5, None, b"ops", 1.5, ["ops"], True])
def test_a_non_string_is_an_invalid_scope_naming_its_type(value: object) -> None:
    with pytest.raises(InvalidScopeError) as error:
        validate_segment("agent", value)
    assert error.value.field == "agent"
    assert error.value.message == f"must be a string, got {type(value).__name__}"


def test_empty_is_refused_with_its_own_message() -> None:
    with pytest.raises(InvalidScopeError) as error:
        validate_segment("context", "")
    assert (error.value.field, error.value.message) == ("context", "must not be empty")


@pytest.mark.parametrize("value", [".", ".."])
def test_dot_and_dot_dot_are_refused(value: str) -> None:
    with pytest.raises(InvalidScopeError) as error:
        validate_segment("context", value)
    assert error.value.message == f"'{value}' is not allowed"


@pytest.mark.parametrize(
    "value",
    ["a" * 65, "ops bot", "ops/bot", "ops\\bot", "봇", "ops%2Fbot", "ops\nbot", "ops:bot", "é"],
)
def test_characters_and_length_outside_the_alphabet_are_refused(value: str) -> None:
    with pytest.raises(InvalidScopeError) as error:
        validate_segment("agent", value)
    assert error.value.field == "agent"
    assert error.value.message == (
        f"'{value}' must be 1-64 characters of letters, digits, '.', '_' or '-'"
    )


def test_a_long_invalid_name_is_shown_cut_to_80_characters() -> None:
    value = "x" * 79 + "!"  # 80 characters: shown whole
    with pytest.raises(InvalidScopeError) as error:
        validate_segment("agent", value)
    assert error.value.message.startswith(f"'{value}' must be")

    value = "y" * 81  # 81 characters: 77 of them, then "..."
    with pytest.raises(InvalidScopeError) as error:
        validate_segment("agent", value)
    assert error.value.message == (
        "'" + "y" * 77 + "...' must be 1-64 characters of letters, digits, '.', '_' or '-'"
    )


def test_an_invalid_scope_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        validate_segment("agent", "a b")


# --- KnowledgeScope -------------------------------------------------------------------


def test_scope_key_and_str() -> None:
    scope = KnowledgeScope("ops-bot", "runbooks")
    assert scope.key == "ops-bot/runbooks"
    assert str(scope) == "ops-bot/runbooks"


def test_scope_validates_both_segments_naming_each() -> None:
    with pytest.raises(InvalidScopeError) as agent:
        KnowledgeScope("bad agent", "runbooks")
    assert agent.value.field == "agent"
    with pytest.raises(InvalidScopeError) as context:
        KnowledgeScope("ops-bot", "..")
    assert context.value.field == "context"


def test_scopes_are_values() -> None:
    assert KnowledgeScope("a", "b") == KnowledgeScope("a", "b")
    assert KnowledgeScope("a", "b") != KnowledgeScope("b", "a")
    assert len({KnowledgeScope("a", "b"), KnowledgeScope("a", "b")}) == 1
    with pytest.raises(AttributeError):
        KnowledgeScope("a", "b").agent = "c"  # type: ignore[misc]


# --- parse_object_key -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "scope", "path"),
    [
        ("ops-bot/runbooks/rollback.md", ("ops-bot", "runbooks"), "rollback.md"),
        ("a/b/deep/er/file.pdf", ("a", "b"), "deep/er/file.pdf"),
        ("a/b/.hidden", ("a", "b"), ".hidden"),
        ("a/b/x..y", ("a", "b"), "x..y"),
    ],
)
def test_keys_split_into_scope_and_path(key: str, scope: tuple[str, str], path: str) -> None:
    assert parse_object_key(key) == ScopedKey(KnowledgeScope(*scope), path)


@pytest.mark.parametrize("key", ["", "a", "a/b", "a/b/", "a/"])
def test_a_key_without_a_document_path_is_refused(key: str) -> None:
    with pytest.raises(ValidationError) as error:
        parse_object_key(key)
    assert error.value.field == "key"
    assert error.value.message == f"'{key}' is not of the form <agent>/<context>/<path>"


@pytest.mark.parametrize(
    "key", ["a/b/x//y", "a/b/./x", "a/b/../c/x", "a/b/x/..", "a/b/x/", "a/b/x/."]
)
def test_empty_dot_and_dot_dot_path_segments_are_refused(key: str) -> None:
    with pytest.raises(ValidationError) as error:
        parse_object_key(key)
    assert error.value.field == "key"
    assert error.value.message == f"'{key}' has an empty, '.' or '..' path segment"


@pytest.mark.parametrize(("key", "field"), [("bad agent/c/x", "agent"), ("a/../x", "context")])
def test_a_bad_scope_segment_in_a_key_names_the_segment(key: str, field: str) -> None:
    with pytest.raises(InvalidScopeError) as error:
        parse_object_key(key)
    assert error.value.field == field
