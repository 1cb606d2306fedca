"""How text becomes terms and scores become one list: pure functions every store shares.

``analysis`` turns text into keyword terms (English stems, Korean morphemes, CJK
bigrams), ``headings`` weighs a chunk's title and headings on the keyword side, and
``fusion`` normalises each side's scores and fuses them into one ranking in [0, 1].
"""
