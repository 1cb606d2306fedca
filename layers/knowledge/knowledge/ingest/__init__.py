"""From a source to a store: sources, chunking, the indexing pipeline and API writes.

``sources`` list and read documents (a folder, the bucket), ``repos`` mirror Git
repositories into a scope, ``chunking`` cuts extracted text into chunks, ``pipeline``
runs source -> extract -> chunk -> embed -> store once for every store, driving the
store's write sessions (``index_source(store, scope, source)``, ``reindex_source``,
``upsert_document``, ``delete_document``; a store never indexes by itself):
``document_writer`` writes one document, ``chunk_embedding`` embeds its chunks in
batches reusing an indexed version's vectors, ``run_report`` keeps what a run did and
records its problems, ``lookahead`` prepares the next documents while one is written.
``api_writes`` are the document writes of the HTTP API.
"""
