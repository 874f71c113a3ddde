"""Run every page of the app read-only with Streamlit's AppTest and print what each showed.

Run by the Python of the hosted app's environment (a venv with only ``requirements-app.txt``,
see ``tests/test_app_venv.py``), so it imports nothing but the standard library, Streamlit
and the app itself. Prints one JSON object: page -> {"exceptions", "errors", "titles", "notes"}.

    python tests/app_venv_pages.py        # from the repository root
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    os.environ["LEGIVAL_READONLY"] = "1"
    os.environ.pop("LEGIVAL_STORE", None)
    from streamlit.testing.v1 import AppTest

    pages = re.findall(r'st\.Page\(\s*"([^"]+)"', (REPO / "app.py").read_text(encoding="utf-8"))
    seen = {}
    for page in pages:
        app = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
        app.switch_page(page)
        app.run()
        seen[page] = {
            "exceptions": [e.message for e in app.exception],
            "errors": [e.value for e in app.error],
            "titles": [t.value for t in app.title],
            "notes": [m.value for m in [*app.warning, *app.info]],
        }
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
