"""The store wing: what a tune leaves behind and how it is kept.

A candidate's result (``results``, ``confidence``), a tune's record (``record``), the one schema
check of everything read back (``validate``), the namespace and entry format (``format``), the
legacy per-namespace documents (``documents``) and bundles (``bundle``). No I/O: the stores
themselves are backends.
"""
