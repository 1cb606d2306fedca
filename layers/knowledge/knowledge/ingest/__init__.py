"""From a source to a store: sources, chunking, the indexing pipeline and API writes.

``sources`` list and read documents (a folder, the bucket), ``repos`` mirror Git
repositories into a scope, ``chunking`` cuts extracted text into chunks, ``pipeline``
runs source -> extract -> chunk -> embed -> store once for every store (with
``lookahead`` preparing the next documents while one is written), and ``writes``
are the document writes of the HTTP API.
"""
