"""Write docs/store_contract.md from the store schema (entropy_lens/store/schema.py).

Usage: python scripts/store_contract.py [--check]   (--check: exit 1 when the file differs)
"""

import argparse
import sys
from pathlib import Path

from entropy_lens.store.contract import contract_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "store_contract.md"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--check", action="store_true", help="only check that the file is up to date")
if parser.parse_args().check:
    sys.exit(0 if DOC.exists() and DOC.read_text(encoding="utf-8") == contract_markdown() else 1)
DOC.write_text(contract_markdown(), encoding="utf-8")
print(f"wrote {DOC.relative_to(DOC.parents[1])}")
