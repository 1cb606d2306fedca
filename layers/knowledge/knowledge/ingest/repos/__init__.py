"""Git repositories as document sources, per scope.

A repository is registered in a scope (``registration.RepoRegistration``: name, URL,
branch, optional path prefixes, a credential reference, SSH known hosts) and synced:
a shallow fetch of its branch (``fetch``: dulwich, pure Python, no ``git`` binary), its
tree walked at the fetched commit, and the files the product reads **mirrored** into the
scope under the reserved prefix ``_repos/<name>/`` (``sync``), each with a metadata
sidecar (``origin`` ``repo``, ``url``, ``repo``, ``commit``). The existing pipelines then
index and delete them as they do uploads: the S3 event pipeline on AWS, the folder
watcher or ``kb index`` locally. One ingestion path, not two (docs/sources.md says why).

Incremental twice over: the fetch after the first asks the server only for what changed
since the last synced commit (``trees`` keeps that commit's trees, the mirror its blobs);
and a per-repository manifest (path -> blob id) in the repository's state; only blobs
whose id changed are written, paths gone from the tree are deleted, and nothing
outside ``_repos/<name>/`` is ever touched. A failed sync (unreachable host, refused
credentials, over a bound) writes nothing and records its problem: the last good sync
stays searchable.

Registrations and states live under ``REGISTRY_PREFIX`` (``.kb@repos/``) of the same
storage: ``@`` is never part of a scope segment, so no document write can reach it, and
the leading ``.`` makes every listing and S3 event skip it.
"""

from __future__ import annotations

MIRROR_FOLDER = "_repos"
"""The reserved folder of a scope that holds the mirrored repositories: ``_repos/<name>/``.
Document writes refuse paths under it (``knowledge.ingest.api_writes.RESERVED_PREFIXES``): only
a sync writes there."""

REGISTRY_PREFIX = ".kb@repos/"
"""The storage prefix of registrations and states: ``.kb@repos/<agent>/<context>/<name>``."""

__all__ = ["MIRROR_FOLDER", "REGISTRY_PREFIX"]
