"""Scripts a run starts in a fresh interpreter (``bench.common.environment.PROBES_DIR``),
so a measurement (cold start, peak memory, a worker on another checkout) sees nothing of
the parent process. They import only the product (and the document probe the PDF
extractors it measures, ``bench.common.pdf_libraries``).
"""
