"""Entry point for ``python -m i6_shard``."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
