#!/usr/bin/env python3
"""Regenerate the golden /metrics files on purpose:  .venv/bin/python tests/golden/update.py

Review the diff before committing: every changed line is a change users see.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.golden.render import ALL_CASES, golden_path, render  # noqa: E402

for case in ALL_CASES:
    golden_path(case).write_text(render(case))
    print(f"wrote {golden_path(case)}")
