"""``python -m x402lab``: the command line."""

from x402lab.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
