"""Write (or check) docs/openapi.json, the OpenAPI document of ``nrp serve``.

    python scripts/openapi.py            # rewrite docs/openapi.json from the app
    python scripts/openapi.py --check    # exit 1 when the committed file is out of date

The document is generated from the FastAPI app itself (``nrp.service.app.openapi_document``),
so it cannot drift from the routes; tests/service/test_service_config.py fails when the
committed copy differs, and ``make openapi`` refreshes it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "openapi.json"


def render() -> str:
    from nrp.service.app import openapi_document

    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not TARGET.is_file() or TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run `make openapi`", file=sys.stderr)
            return 1
        print(f"{TARGET} is up to date")
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
