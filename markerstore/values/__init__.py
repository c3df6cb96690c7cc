"""Text to typed values, as Spark's readers read it: the CSV tokenizer and its dialects
(``csv``), JSON text (``json``), Spark's date-time patterns (``patterns``, their names
from CLDR through ``locales``) and the dates and times they read (``datetimes``), number
tokens (``numbers``: a locale's grouping and decimal separators, NaN and the infinities),
the reader options that say how text reads (``formats``), and the one cast of a column to
an Arrow type with the one search for the rows that do not cast (``cast``; ``columnwise``
casts the columns of one type together).

Part of the core: it imports nothing of ingest or errortable, which both read through it.
Importing the package imports none of its modules.
"""
