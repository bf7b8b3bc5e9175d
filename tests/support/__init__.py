"""Helpers shared by the test suites, imported by name (``from support.postgres import query``):
pytest's ``pythonpath`` option puts ``tests/`` on ``sys.path``, so no test touches it.

One module per suite's subject: ``postgres`` (the server, throwaway databases), ``dask_cluster``,
``media``, ``ledger``, ``x402``, ``prepay``, ``client``, ``outcomes``, ``batch``, ``gateway``,
``http_server`` (a small HTTP server besides the emulator; not ``http``: scripts run from
this folder would import it for the standard library's)."""
