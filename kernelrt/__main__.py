"""``python -m kernelrt``: the ``kernelrt`` command (``kernelrt/cli.py``) without the console script.

Works where the script is not on ``PATH`` (a venv that is not activated, ``pip install --user``),
and runs the ``kernelrt`` of that very interpreter.
"""

import sys

from .cli import main

if __name__ == "__main__":  # importing this module (documentation tools do) runs nothing
    sys.exit(main())
