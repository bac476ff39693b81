"""``make demo``: seed 001's cafe scenario, traced by agenttrace, offline.

The agent code lives in ``agenttrace/demo/cafe.py`` (the ``agenttrace resume`` command continues
its sessions); run ``python examples/cafe.py --help`` for the options.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: litellm's own prices

from agenttrace.demo.cafe import main

if __name__ == "__main__":
    sys.exit(main())
